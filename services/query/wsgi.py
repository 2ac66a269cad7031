"""WSGI entry point: `gunicorn -c deploy/gunicorn/query.py services.query.wsgi:app`."""

from services.common.observability import setup_logging

from .app import create_app

setup_logging("query")
app = create_app()
