"""The event store: envelopes, payload schemas with upcasters, the `EventStore` port and an
in-memory adapter. The Redis adapter lives in `services/redis_store`."""

# Every reader of a score stream needs its payload schemas: register them with the package.
from . import score_stream as _score_stream  # noqa: F401
