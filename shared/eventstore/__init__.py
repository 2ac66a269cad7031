"""The event store: envelopes, payload schemas with upcasters, the `EventStore` port and an
in-memory adapter. The Redis adapter lives in `services/redis_store`."""
