"""A quick path through marshmallow `load` for data that is plainly valid.

Every stored event is checked on write and on read, and every turn request is loaded with
its schema; marshmallow spends 20-40 µs on each such small object, several times a turn.
`fast_loader(schema)` compiles a schema into a plain function that answers only when the
answer is certain: it returns what `schema.load(data)` would return for data whose every
value has exactly the expected type and passes the field's validators, and `None` for
anything else — a wrong type, a missing field, an unknown key, a value out of range. On
`None` the caller runs marshmallow itself, which stays the one authority: it accepts or
rejects, and writes the error messages. So the quick path can only ever say "yes" to what
marshmallow says "yes" to (a property test holds it to that, tests/unit/test_fastload.py).

Only a plain subset is compiled: String, Integer, Boolean, Nested, List and Dict fields with
Range, Length and OneOf validators, no hooks (`@validates_schema` and friends), no data
keys. A schema outside that subset gets no loader and always goes through marshmallow.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from marshmallow import EXCLUDE, INCLUDE, RAISE, Schema, ValidationError, fields, missing, validate
from marshmallow.types import UnknownOption

Loader = Callable[[Any], Any]  # the loaded value, or None for "ask marshmallow"
_NO = object()  # a field loader's "not sure" (None can be a loaded value)

_ATTRIBUTE = "_fastload_loader"  # where a schema instance keeps its compiled loader


class Unsupported(Exception):
    """The schema uses something the quick path does not model."""


def fast_loader(schema: Schema) -> Loader | None:
    """The compiled loader of `schema`, or None when it cannot be compiled.

    Kept on the schema instance, so it lives and dies with it (a schema made per call,
    such as the default ruleset's, leaves nothing behind).
    """
    try:
        return cast(Loader | None, getattr(schema, _ATTRIBUTE))
    except AttributeError:
        pass
    try:
        loader: Loader | None = _compile_schema(schema)
    except Unsupported:
        loader = None
    setattr(schema, _ATTRIBUTE, loader)
    return loader


class FastLoadSchema(Schema):
    """A schema whose plain `load(data)` tries the compiled quick path first."""

    def load(
        self,
        data: Any,
        *,
        many: bool | None = None,
        partial: Any = None,
        unknown: UnknownOption | None = None,
    ) -> Any:
        """See `marshmallow.Schema.load`."""
        if many is None and partial is None and unknown is None:
            loader = fast_loader(self)
            if loader is not None:
                loaded = loader(data)
                if loaded is not None:
                    return loaded
        return super().load(data, many=many, partial=partial, unknown=unknown)


def _compile_schema(schema: Schema) -> Loader:
    if schema.many or schema.only or schema.exclude or schema.partial:
        raise Unsupported("many/only/exclude/partial")
    if any(schema._hooks.values()):  # pre/post load, validates, validates_schema
        raise Unsupported("hooks")
    unknown = schema.unknown
    if unknown not in (RAISE, EXCLUDE, INCLUDE):
        raise Unsupported(f"unknown={unknown!r}")
    compiled: list[tuple[str, Callable[[Any], Any], bool, bool, Any]] = []
    for name, field in schema.load_fields.items():
        if field.data_key is not None or field.attribute is not None:
            raise Unsupported("data_key/attribute")
        compiled.append(
            (
                name,
                _compile_field(field),
                field.required,
                bool(field.allow_none),
                field.load_default,
            )
        )
    names = frozenset(schema.load_fields)

    def load(data: Any) -> Any:
        if type(data) is not dict:
            return None
        out: dict[str, Any] = {}
        for name, load_value, required, allow_none, default in compiled:
            if name in data:
                value = data[name]
                if value is None:
                    if not allow_none:
                        return None
                    out[name] = None
                    continue
                loaded = load_value(value)
                if loaded is _NO:
                    return None
                out[name] = loaded
            elif required:
                return None
            elif default is not missing:
                out[name] = default() if callable(default) else default
        if not names.issuperset(data):  # keys the schema does not declare
            if unknown == RAISE:
                return None
            if unknown == INCLUDE:
                out.update((k, v) for k, v in data.items() if k not in names)
        return out

    return load


def _compile_field(field: fields.Field) -> Callable[[Any], Any]:
    kind = type(field)
    if kind is fields.String:
        base = _typed(str)
    elif kind is fields.Integer:
        base = _typed(int)  # bool is excluded by `type(...) is int`, as marshmallow does
    elif kind is fields.Boolean or getattr(field, "exactly_bool", False):
        # A Boolean subclass that takes exactly true and false (services' StrictBoolean, R9.2's
        # `recall_abbot`) is what the quick path checks anyway.
        base = _boolean(cast(fields.Boolean, field))
    elif kind is fields.Nested:
        base = _nested(cast(fields.Nested, field))
    elif kind is fields.List:
        base = _list(cast(fields.List, field))
    elif kind is fields.Dict:
        base = _dict(cast(fields.Dict, field))
    else:
        raise Unsupported(f"field {kind.__name__}")
    checks = [_compile_validator(v) for v in field.validators]
    if not checks:
        return base
    if kind in (fields.String, fields.Integer) and len(checks) == 1:
        return _typed_and_checked(str if kind is fields.String else int, checks[0])

    def checked(value: Any) -> Any:
        loaded = base(value)
        if loaded is _NO:
            return _NO
        for check in checks:
            if not check(loaded):
                return _NO
        return loaded

    return checked


def _typed_and_checked(kind: type, check: Callable[[Any], bool]) -> Callable[[Any], Any]:
    # The common case (an int with a Range, a str with a Length or OneOf) in one call.
    def load(value: Any) -> Any:
        return value if type(value) is kind and check(value) else _NO

    return load


def _typed(kind: type) -> Callable[[Any], Any]:
    def load(value: Any) -> Any:
        return value if type(value) is kind else _NO

    return load


def _boolean(field: fields.Boolean) -> Callable[[Any], Any]:
    # Without truthy sets marshmallow takes bool(value); with them, membership decides.
    true_ok = not field.truthy or True in field.truthy
    false_ok = not field.truthy or False in field.falsy

    def load(value: Any) -> Any:
        if value is True:
            return True if true_ok else _NO
        if value is False:
            return False if false_ok else _NO
        return _NO

    return load


def _nested(field: fields.Nested) -> Callable[[Any], Any]:
    if field.many or field.only or field.exclude or field.unknown is not None:
        raise Unsupported("nested options")
    schema = field.schema
    inner = fast_loader(schema)

    def load(value: Any) -> Any:
        loaded = inner(value) if inner is not None else None
        if loaded is None:  # not sure, or a schema outside the subset: marshmallow decides
            try:
                loaded = schema.load(value)
            except ValidationError:
                return _NO
        return loaded

    return load


def _list(field: fields.List) -> Callable[[Any], Any]:
    inner = _nullable(field.inner)

    def load(value: Any) -> Any:
        if type(value) is not list:
            return _NO
        out = []
        for item in value:
            loaded = inner(item)
            if loaded is _NO:
                return _NO
            out.append(loaded)
        return out

    return load


def _dict(field: fields.Dict) -> Callable[[Any], Any]:
    keys = _nullable(field.key_field) if field.key_field is not None else None
    values = _nullable(field.value_field) if field.value_field is not None else None

    def load(value: Any) -> Any:
        if type(value) is not dict:
            return _NO
        if keys is None and values is None:
            return dict(value)
        out = {}
        for k, v in value.items():
            if keys is not None:
                k = keys(k)
                if k is _NO:
                    return _NO
            if values is not None:
                v = values(v)
                if v is _NO:
                    return _NO
            out[k] = v
        return out

    return load


def _nullable(field: fields.Field) -> Callable[[Any], Any]:
    """An inner field (of a List or Dict): None passes only where the field allows it."""
    load_value = _compile_field(field)
    allow_none = bool(field.allow_none)

    def load(value: Any) -> Any:
        if value is None:
            return None if allow_none else _NO
        return load_value(value)

    return load


def _compile_validator(validator: Any) -> Callable[[Any], bool]:
    kind = type(validator)
    if kind is validate.Range:
        low, high = validator.min, validator.max
        low_in, high_in = validator.min_inclusive, validator.max_inclusive

        def in_range(value: Any) -> bool:
            if low is not None and (value < low if low_in else value <= low):
                return False
            return high is None or (value <= high if high_in else value < high)

        return in_range
    if kind is validate.Length:
        short, long, equal = validator.min, validator.max, validator.equal

        def right_length(value: Any) -> bool:
            size = len(value)
            if equal is not None:
                return size == equal
            return (short is None or size >= short) and (long is None or size <= long)

        return right_length
    if kind is validate.OneOf:
        choices = list(validator.choices)
        try:
            by_type = {(type(c), c) for c in choices}  # typed: True must not pass for 1
        except TypeError:  # an unhashable choice
            raise Unsupported("OneOf with unhashable choices") from None

        def one_of(value: Any) -> bool:
            try:
                return (type(value), value) in by_type
            except TypeError:
                return False

        return one_of
    raise Unsupported(f"validator {kind.__name__}")
