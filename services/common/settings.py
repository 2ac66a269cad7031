"""Settings from environment variables: a default is overridden by the variable of its name."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any


def from_env(
    defaults: Mapping[str, Any], environ: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """`defaults` with every key that is set in the environment replaced, cast to its type.

    A default of None takes the variable as a string; a bad number fails at start-up with
    the variable's name rather than later.
    """
    env = os.environ if environ is None else environ
    out: dict[str, Any] = {}
    for key, default in defaults.items():
        raw = env.get(key)
        if raw is None:
            out[key] = default
            continue
        cast = str if default is None else type(default)
        try:
            out[key] = (raw.strip().lower() in ("1", "true", "yes")) if cast is bool else cast(raw)
        except ValueError:
            raise SystemExit(f"{key}={raw!r} is not a valid {cast.__name__}") from None
    return out
