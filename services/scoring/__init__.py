"""The scoring worker: Celery tasks that turn a game's moves into its score stream."""
