"""The Redis store's payload encoder (services/redis_store/store.py `_payload_json`) writes
what `json.dumps(payload, separators=(",", ":"))` writes, byte for byte: the stored log's
form does not depend on which encoder made it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.redis_store.store import _payload_json

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


def dumps(payload: Any) -> str:
    return json.dumps(payload, separators=(",", ":"))


@given(st.dictionaries(st.text(), JSON, max_size=6))
def test_the_same_bytes_as_json_dumps(payload: dict[str, Any]) -> None:
    assert _payload_json(payload) == dumps(payload)


def test_event_payloads() -> None:
    payloads = [
        {"player": 1, "bank_ms": 259_200_000},
        {"tile": "V", "deadline_ms": 1_700_000_000_000},
        {"player": 0, "tile": "D", "x": -1, "y": 2, "rotation": 3, "meeple": None},
        {"players": [{"name": "Zoë 山", "player_id": None}], "ruleset": {"farms": "3rd"}},
        {"score": 1.5, "nan": float("nan"), "inf": float("-inf"), "keys": {1: True}},
    ]
    for payload in payloads:
        assert _payload_json(payload) == dumps(payload)


def test_what_json_cannot_encode_is_refused_alike() -> None:
    with pytest.raises(TypeError, match="not JSON serializable"):
        _payload_json({"at": object()})
