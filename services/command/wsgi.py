"""WSGI entry point: `gunicorn -c deploy/gunicorn/command.py services.command.wsgi:app`."""

from .app import create_app

app = create_app()
