"""The bot worker: plays the turns of bot seats (Celery queue `bots`)."""
