"""WSGI entry point: `gunicorn -c deploy/gunicorn/command.py services.command.wsgi:app`."""

from services.common.observability import setup_logging

from .app import create_app

setup_logging("command")
app = create_app()
