"""`TurnIn.load`'s plain path answers exactly as marshmallow's fields do.

`plain_turn` vouches for a turn body without marshmallow's field-by-field walk (a turn's
hottest validation); these properties hold it to the fields: for any JSON value it vouches
for, the fields load the same dict, and for every body the fields accept, it vouches (so the
fast path covers every valid turn, and never accepts what the fields refuse).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from marshmallow import Schema, ValidationError

from carcassonne.geometry import EDGES, HALF_EDGES
from services.command.schemas import TurnIn, plain_turn

JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-20_000, 20_000),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=10),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


VALID_MEEPLE = st.one_of(
    st.builds(
        lambda f, e: {"feature": f, "edge": e},
        st.sampled_from(["road", "city"]),
        st.sampled_from(EDGES),
    ),
    st.builds(lambda h: {"feature": "field", "half_edge": h}, st.sampled_from(HALF_EDGES)),
    st.builds(lambda f: {"feature": f}, st.sampled_from(["monastery", "garden"])),
).flatmap(lambda m: st.one_of(st.just(m), st.booleans().map(lambda a: {**m, "abbot": a})))
VALID = st.fixed_dictionaries(
    {"x": st.integers(-10_000, 10_000), "y": st.integers(-10_000, 10_000),
     "rotation": st.integers(0, 3)},
    optional={"meeple": st.one_of(st.none(), VALID_MEEPLE),
              "tile": st.text(min_size=1, max_size=8), "recall_abbot": st.booleans()},
)  # fmt: skip
BORDER: list[Any] = [None, True, False, 1.5, "1", [], {}]  # never a JSON integer, string or boolean
WRONG = {  # per key: values on and across each rule's border, where the two paths could part
    "x": st.sampled_from([-10_001, 10_001, -10_000, 10_000, *BORDER]),
    "y": st.sampled_from([-10_001, 10_001, -10_000, 10_000, *BORDER]),
    "rotation": st.sampled_from([-1, 4, 0, 3, *BORDER]),
    "tile": st.sampled_from(["", "A", "12345678", "123456789", *BORDER]),
    "recall_abbot": st.sampled_from([0, 1, "true", *BORDER]),
    "meeple": st.one_of(VALID_MEEPLE, st.sampled_from([*BORDER, {"feature": "road"}])),
    "feature": st.sampled_from(["road", "city", "field", "monastery", "garden", "farm", *BORDER]),
    "edge": st.sampled_from([*EDGES, "NNW", "n", *BORDER]),
    "half_edge": st.sampled_from([*HALF_EDGES, "N", *BORDER]),
    "abbot": st.sampled_from([0, 1, *BORDER]),
    "other": st.sampled_from(BORDER),
}
KEYS = ["x", "y", "rotation", "meeple", "tile", "recall_abbot", "other"]
MEEPLE_KEYS = ["feature", "edge", "half_edge", "abbot", "other"]


@st.composite
def mutated(draw: st.DrawFn) -> Any:
    """A valid turn with one to three of its values (or its meeple's) wrong, added or gone."""
    body = draw(VALID)
    for _ in range(draw(st.integers(1, 3))):
        meeple = body.get("meeple")
        if isinstance(meeple, dict) and draw(st.booleans()):
            body["meeple"] = meeple = dict(meeple)
            target, key = meeple, draw(st.sampled_from(MEEPLE_KEYS))
        else:
            target, key = body, draw(st.sampled_from(KEYS))
        if key in target and draw(st.booleans()):
            del target[key]
        else:
            target[key] = draw(WRONG[key])
    return body


BODY = st.one_of(VALID, mutated(), JUNK)


def fields_load(body: Any) -> dict[str, Any] | None:
    """What marshmallow's field walk (the schema's own `Schema.load`) loads, or None."""
    try:
        return Schema.load(TurnIn(), body)
    except ValidationError:
        return None


@settings(max_examples=3_000, deadline=None)
@given(BODY)
def test_the_plain_path_and_the_fields_give_one_answer(body: Any) -> None:
    assert plain_turn(body) == fields_load(body)


@pytest.mark.parametrize(
    "body",
    [
        {"x": 0, "y": 1, "rotation": 2},
        {"x": 0, "y": 1, "rotation": 2, "meeple": None},
        {"x": -3, "y": 4, "rotation": 0, "meeple": {"feature": "road", "edge": "N"}},
        {"x": 1, "y": 0, "rotation": 3, "meeple": {"feature": "field", "half_edge": "NNW"}},
        {"x": 1, "y": 0, "rotation": 3, "meeple": {"feature": "garden", "abbot": True}},
        {"x": 1, "y": 0, "rotation": 1, "tile": "D", "recall_abbot": True},
    ],
)
def test_every_shape_a_client_sends_takes_the_plain_path(body: dict[str, Any]) -> None:
    loaded = plain_turn(body)
    assert loaded is not None and loaded == fields_load(body)


@pytest.mark.parametrize(
    "body",
    [
        {"x": True, "y": 0, "rotation": 0},  # a boolean is no integer
        {"x": 0, "y": 0, "rotation": 4},
        {"x": 0, "y": 0, "rotation": 0, "meeple": {"feature": "road"}},  # no edge
        {
            "x": 0,
            "y": 0,
            "rotation": 0,
            "meeple": {"feature": "city", "edge": "N", "half_edge": "NNE"},
        },
        {"x": 0, "y": 0, "rotation": 0, "speed": 1},
    ],
)
def test_a_refused_body_is_still_worded_by_the_fields(body: dict[str, Any]) -> None:
    assert plain_turn(body) is None
    with pytest.raises(ValidationError) as refused:
        TurnIn().load(body)
    assert refused.value.messages  # the field-by-field message a client gets as before
