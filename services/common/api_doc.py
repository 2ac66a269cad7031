"""The OpenAPI document both services serve at /openapi.json: the checked-in file beside this
module (`openapi.json`, package data, so the image has it too; `docs/openapi.json` links to
it). It is built from both services' blueprints by `make openapi` (tools/openapi.py), which a
service never imports: serving the document loads nothing of the other service.
tests/integration/test_openapi.py fails when the built document and the file differ.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import flask
import flask_smorest

from .schemas import Error

DOC_FILE = Path(__file__).with_name("openapi.json")
OPENAPI_VERSION = "3.1.0"


class SpecApi(flask_smorest.Api):
    """flask-smorest's Api with the services' error schema in place of its default one."""

    ERROR_SCHEMA = Error


@cache
def document_bytes() -> bytes:
    """The checked-in document, read once per process."""
    return DOC_FILE.read_bytes()


class ContractApi(SpecApi):
    """The services' Api: /openapi.json serves the one combined, checked-in document."""

    def _openapi_json(self) -> flask.Response:
        return flask.current_app.response_class(document_bytes(), mimetype="application/json")
