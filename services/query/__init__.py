"""The query service: read-only views of games projected from their move and score streams."""
