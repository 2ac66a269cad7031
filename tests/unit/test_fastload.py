"""The quick load path (`eventstore.fastload`) never says yes where marshmallow says no.

For every compiled schema — each stored event type and version, and the command service's
request bodies — hypothesis builds payloads near the schema (right and wrong types, values
at and past each bound, missing and unknown keys, nulls). Whenever the quick path answers,
marshmallow's own `load` must accept the same payload and return the same data. And the
payloads real games produce must take the quick path, or it would be dead weight.
"""

from __future__ import annotations

import gc
import random
import weakref
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from marshmallow import Schema, ValidationError, fields, validate, validates_schema

from carcassonne.simulate import random_game
from carcassonne.state import GameState
from eventstore.fastload import FastLoadSchema, fast_loader
from eventstore.port import InMemoryEventStore
from eventstore.schemas import SCHEMAS, to_new
from eventstore.score_stream import score_events
from services.command.schemas import CreateGameIn, MeepleIn, TurnIn

JSON_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**40), 2**40),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=6),
)
ANY_JSON = st.recursive(
    JSON_SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)


def near(field: fields.Field, depth: int = 0) -> st.SearchStrategy[Any]:
    """Values around what `field` accepts: good ones, bounds and their neighbours, wrong types."""
    options: list[st.SearchStrategy[Any]] = [ANY_JSON]
    for check in field.validators:
        if isinstance(check, validate.OneOf):
            options.append(st.sampled_from(list(check.choices)))
        if isinstance(check, validate.Range):
            for bound in (check.min, check.max):
                if bound is not None:
                    options.append(st.sampled_from([bound - 1, bound, bound + 1, float(bound)]))
        if isinstance(check, validate.Length):
            for size in (check.min, check.max, check.equal):
                if size is not None and depth < 2:
                    inner = near(field.inner, depth + 1) if isinstance(field, fields.List) else None
                    for n in {max(0, size - 1), size, size + 1}:
                        options.append(
                            st.lists(inner, min_size=n, max_size=n)
                            if inner is not None
                            else st.text(min_size=n, max_size=n)
                        )
    if isinstance(field, fields.Integer):
        # bools are ints to Python but not to marshmallow; floats and digit strings likewise
        options += [st.integers(-3, 12), st.booleans(), st.sampled_from([1.0, "1", 2.5])]
    if isinstance(field, fields.String):
        options.append(st.sampled_from([b"N", 1, ["N"]]))
    if isinstance(field, fields.Boolean):
        options.append(st.sampled_from([True, False, 1, 0, "true"]))
    if isinstance(field, fields.Nested) and depth < 3:
        options.append(payloads(field.schema, depth + 1))
    if isinstance(field, fields.List) and depth < 3:
        options.append(st.lists(near(field.inner, depth + 1), max_size=4))
    if isinstance(field, fields.Dict) and depth < 3:
        values = near(field.value_field, depth + 1) if field.value_field is not None else ANY_JSON
        options.append(
            st.dictionaries(st.sampled_from(["width", "height", "x"]), values, max_size=3)
        )
    return st.one_of(options)


def payloads(schema: Schema, depth: int = 0) -> st.SearchStrategy[Any]:
    """Dicts built from the schema's fields (each maybe left out) plus maybe an unknown key."""
    parts = {name: st.one_of(st.just(None), near(f, depth)) for name, f in schema.fields.items()}

    @st.composite
    def build(draw: st.DrawFn) -> Any:
        out: dict[str, Any] = {}
        for name, strategy in parts.items():
            if draw(st.integers(0, 5)):  # mostly present
                out[name] = draw(strategy)
        if draw(st.integers(0, 9)) == 0:
            out[draw(st.sampled_from(["extra", "rot", "x"]))] = draw(JSON_SCALARS)
        return out

    return build() | ANY_JSON if depth == 0 else build()


SCHEMA_CASES = [(f"{t} v{v}", s) for (t, v), s in sorted(SCHEMAS.items())] + [
    ("TurnIn", TurnIn()),
    ("CreateGameIn", CreateGameIn()),
]


def marshmallow_load(schema: Schema, data: Any) -> Any:
    """Marshmallow's own verdict, bypassing the quick path."""
    return Schema.load(schema, data)


@pytest.mark.parametrize(("name", "schema"), SCHEMA_CASES, ids=[n for n, _ in SCHEMA_CASES])
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_quick_yes_is_marshmallows_yes(name: str, schema: Schema, data: st.DataObject) -> None:
    loader = fast_loader(schema)
    assert loader is not None, f"{name} should compile"
    payload = data.draw(payloads(schema))
    quick = loader(payload)
    if quick is None:
        return  # "not sure": the caller asks marshmallow
    assert quick == marshmallow_load(schema, payload)


def test_payloads_of_real_games_take_the_quick_path() -> None:
    rng = random.Random(7)
    for _ in range(3):
        _, events = random_game(rng)
        moves = [to_new(e) for e in events]
        store = InMemoryEventStore()
        store.append("g", "moves", moves, expected=0, command_id="c")
        scores = score_events(GameState(), store.read("g", "moves"))
        for event in moves + scores:
            loader = fast_loader(SCHEMAS[(event.type, event.version)])
            assert loader is not None and loader(event.payload) == event.payload, event.type


@pytest.mark.parametrize(
    "body",
    [
        {"x": 1, "y": -2, "rotation": 3},
        {"x": 0, "y": 0, "rotation": 0, "meeple": None},
        {"x": 0, "y": 1, "rotation": 1, "meeple": {"feature": "city", "edge": "N"}},
        {"x": 0, "y": 1, "rotation": 1, "meeple": {"feature": "field", "half_edge": "NNW"}},
    ],
)
def test_turn_bodies_take_the_quick_path_with_marshmallows_result(body: dict[str, Any]) -> None:
    loader = fast_loader(TurnIn())
    assert loader is not None
    assert loader(body) == marshmallow_load(TurnIn(), body)


@pytest.mark.parametrize(
    "meeple",
    [
        {"feature": "road"},  # no edge: the schema hook refuses it
        {"feature": "field", "edge": "N"},
        {"feature": "monastery", "edge": "N"},
        {"feature": "castle", "edge": "N"},
    ],
)
def test_a_nested_schema_with_a_hook_is_still_checked_by_marshmallow(
    meeple: dict[str, Any],
) -> None:
    body = {"x": 0, "y": 1, "rotation": 0, "meeple": meeple}
    assert fast_loader(MeepleIn()) is None  # its @validates_schema is outside the subset
    assert fast_loader(TurnIn())(body) is None  # type: ignore[misc]
    with pytest.raises(ValidationError):
        TurnIn().load(body)


def test_schemas_outside_the_subset_get_no_quick_path() -> None:
    class Hooked(FastLoadSchema):
        a = fields.Integer()

        @validates_schema
        def never(self, data: dict[str, Any], **_: Any) -> None:
            raise ValidationError("never")

    class OtherField(FastLoadSchema):
        when = fields.DateTime()

    class Keyed(FastLoadSchema):
        a = fields.Integer(data_key="A")

    for schema in (Hooked(), OtherField(), Keyed()):
        assert fast_loader(schema) is None
    with pytest.raises(ValidationError):
        Hooked().load({"a": 1})  # the hook still runs: FastLoadSchema fell back to marshmallow


def test_a_schema_made_per_call_leaves_nothing_behind() -> None:
    """The compiled loader lives on the schema instance: CreateGameIn's default ruleset makes
    a new RulesetIn on every game created, and none of them may stay alive."""
    schema = CreateGameIn()
    assert fast_loader(schema) is fast_loader(schema)  # compiled once per instance
    made = weakref.ref(schema)
    schema.load({"players": [{"name": "a"}, {"name": "b"}]})
    del schema
    gc.collect()
    assert made() is None
