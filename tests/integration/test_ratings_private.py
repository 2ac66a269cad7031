"""Ratings are private to the API key whose games made them (docs/ratings.md): their answers
tell caches so, on a real Redis."""

from __future__ import annotations

import pytest

from services.query.app import create_app
from tests.integration.http_client import api_key

pytestmark = pytest.mark.integration


def test_ratings_are_never_cached_for_another_api_key(redis_url: str) -> None:
    """A key's leaderboards and players' ratings are its own, but their answers said nothing
    to caches: a shared cache keyed by URL (a CDN, nginx's proxy_cache_valid) could hand one
    platform's leaderboard to another. They vary with X-Api-Key and are private, as the games
    list varies with the key."""
    web = create_app({"REDIS_URL": redis_url}).test_client()
    headers = api_key(redis_url)
    for path, status in (("/v1/ratings/classic", 200), ("/v1/ratings?player_id=ana", 404)):
        reply = web.get(path, headers=headers)
        assert reply.status_code == status, reply.data
        assert "X-Api-Key" in reply.vary, path
        assert "private" in reply.cache_control and reply.cache_control.no_cache, path
