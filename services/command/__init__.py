"""The command service: validates moves and appends their events to Redis Streams."""
