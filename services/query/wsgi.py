"""WSGI entry point: `gunicorn -c deploy/gunicorn/query.py services.query.wsgi:app`."""

from .app import create_app

app = create_app()
