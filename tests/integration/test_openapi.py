"""The published document (docs/openapi.json) is what both services serve, is a valid OpenAPI
3.1 document that describes every operation fully, and the contract checker that holds every
integration test's responses to it can fail (issue 15, "Every operation fully described")."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import flask
import pytest
from flask import Flask
from jsonschema import Draft202012Validator  # type: ignore[import-untyped]
from openapi_spec_validator import validate
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from services.command.app import create_app as create_command_app
from services.common.api_doc import DOC_FILE
from services.query.app import create_app as create_query_app
from tests.integration import openapi_client
from tests.integration.http_client import api_key
from tests.integration.openapi_client import ContractError, ValidatingClient
from tools.openapi import OPERATIONS, document_json

# Free-form objects the document keeps on purpose: an error's details (they depend on the
# code) and a stored event's payload (its keys depend on the type: described in words).
FREE_FORM = {("Error", "details"), ("Event", "payload"), ("LogItem", "payload")}


@pytest.fixture(scope="module")
def command(redis_url: str) -> Flask:
    return create_command_app({"REDIS_URL": redis_url, "BROKER_URL": redis_url})


def owner(command: Flask) -> dict[str, str]:
    """The tests' API key on the app's Redis (POST /games needs one)."""
    return api_key(command.config["REDIS_URL"])


@pytest.fixture(scope="module")
def doc() -> dict[str, Any]:
    return dict(json.loads(DOC_FILE.read_text(encoding="utf-8")))


def test_both_services_serve_the_checked_in_document(command: Flask, redis_url: str) -> None:
    query = create_query_app({"REDIS_URL": redis_url})
    on_file = DOC_FILE.read_text(encoding="utf-8")
    assert document_json() == on_file, (
        "docs/openapi.json is out of date: run `make openapi` and commit it"
    )
    for app in (command, query):
        reply = app.test_client().get("/openapi.json")
        assert reply.status_code == 200
        assert reply.get_json() == json.loads(on_file)


def test_the_document_is_valid_openapi_3_1(doc: dict[str, Any]) -> None:
    assert doc["openapi"] == "3.1.0"
    validate(doc)


def test_every_operation_is_fully_described(doc: dict[str, Any]) -> None:
    ids = []
    for path, item in doc["paths"].items():
        for method, op in item.items():
            if method == "parameters":
                continue
            where = f"{method.upper()} {path}"
            ids.append(op["operationId"])
            assert "default" not in op["responses"], where
            success = [s for s in op["responses"] if s.startswith("2")]
            assert success, where
            for status in success:
                if status == "204":  # No Content (DELETE): a body would be a contract error
                    assert "content" not in op["responses"][status], where
                    continue
                content = op["responses"][status]["content"]
                assert content, where
                for media in content.values():
                    assert media["schema"] not in ({}, {"type": "object"}), (where, status)
            for status, response in op["responses"].items():
                if status.startswith(("4", "5")):
                    ref = response["$ref"].rsplit("/", 1)[-1]
                    content = doc["components"]["responses"][ref]["content"]
                    assert set(content) == {"application/problem+json"}, where  # RFC 9457
                    schema = content["application/problem+json"]
                    assert schema["schema"] == {"$ref": "#/components/schemas/Error"}, where
            header_params = {p["name"] for p in op.get("parameters", []) if p["in"] == "header"}
            assert not header_params & {"Authorization", "X-Api-Key"}, where
    assert len(ids) == len(set(ids)) == len(OPERATIONS)
    assert {"createGame", "playTurn", "getTurn", "getBoard", "getScores", "listGames"} <= set(ids)
    assert doc["components"]["securitySchemes"]["bearerAuth"]["scheme"] == "bearer"
    assert doc["components"]["securitySchemes"]["apiKey"]["name"] == "X-Api-Key"
    assert doc["paths"]["/games/{game_id}/turns"]["post"]["security"] == [{"bearerAuth": []}]


def test_the_error_schema_is_the_one_the_services_send(doc: dict[str, Any]) -> None:
    error = doc["components"]["schemas"]["Error"]
    assert error["properties"]["code"]["type"] == "string"
    assert error["properties"]["rule"]["type"] == ["string", "null"]
    assert set(error["required"]) == {"type", "title", "status", "detail", "hint", "code",
                                      "message", "rule", "details"}  # fmt: skip
    assert error["additionalProperties"] is False


def test_no_free_form_objects_where_the_shape_is_known(doc: dict[str, Any]) -> None:
    for name, schema in doc["components"]["schemas"].items():
        for prop, value in schema.get("properties", {}).items():
            if value.get("type") == "object" and "properties" not in value:
                assert (name, prop) in FREE_FORM, f"{name}.{prop} is a free-form object"
            items = value.get("items", {})
            if items.get("type") == "object" and "properties" not in items:
                raise AssertionError(f"{name}.{prop} is a list of free-form objects")


@pytest.mark.parametrize("flag", [0, 1, "true", None])
@pytest.mark.parametrize("key", ["farmers", "incomplete_score"])
def test_ruleset_booleans_are_json_booleans(command: Flask, key: str, flag: Any) -> None:
    # Finding of issue 15: 0 and 1 were taken as false and true (marshmallow's truthy={True}
    # holds 1, since 1 == True), which the document's `type: boolean` does not allow.
    body = {"players": [{"name": "ann"}, {"name": "bob"}], "ruleset": {key: flag}}
    reply = command.test_client().post("/games", json=body, headers=owner(command))
    assert reply.status_code == 422, reply.get_json()
    assert reply.get_json()["details"]["fields"]["ruleset"][key]


def test_ruleset_booleans_true_and_false_are_taken(command: Flask) -> None:
    body = {
        "players": [{"name": "ann"}, {"name": "bob"}],
        "ruleset": {"farmers": False, "incomplete_score": True},
    }
    reply = command.test_client().post("/games", json=body, headers=owner(command))
    assert reply.status_code == 201, reply.get_json()


def test_the_contract_check_fails_on_a_response_the_document_does_not_allow(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Every response checked: an earlier test may already have passed these shapes' first.
    monkeypatch.setattr(openapi_client, "CHECK_EVERY", True)
    app = flask.Flask("liar")
    app.test_client_class = ValidatingClient
    app.extensions["query_service"] = None  # checked as a service's app
    game = "0" * 32

    @app.get("/games/<game_id>/turn")
    def turn(game_id: str) -> Any:
        return {"player": "nobody"}  # not a TurnView

    @app.get("/games/<game_id>/board")
    def board(game_id: str) -> Any:
        return {"code": 404, "message": "no"}, 404  # flask-smorest's old error shape

    @app.get("/games/<game_id>/scores")
    def scores(game_id: str) -> Any:
        return {"code": "teapot", "message": "", "rule": None, "details": {}}, 418

    client = app.test_client()
    for path in ("turn", "board", "scores"):
        with pytest.raises(ContractError):
            client.get(f"/games/{game}/{path}")


def test_each_response_shape_is_validated_until_it_passes_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    checked: set[tuple[str, str, int, str]] = set()
    monkeypatch.setattr(openapi_client, "_checked", checked)
    app = flask.Flask("liar")
    app.test_client_class = ValidatingClient
    app.extensions["query_service"] = None
    missing = flask.Response(
        json.dumps({"type": "/errors#game_not_found", "title": "Game not found", "status": 404,
                    "detail": "no such game", "hint": "GET /games lists games",
                    "code": "game_not_found", "message": "no such game", "rule": None,
                    "details": {}}),
        404,
        mimetype="application/problem+json",
    )  # fmt: skip
    replies = iter([({"player": "nobody"}, 200), ({"player": "nobody"}, 200), missing])

    @app.get("/games/<game_id>/turn")
    def turn(game_id: str) -> Any:
        return next(replies)  # not a TurnView, twice; then a 404 the document allows

    client = app.test_client()
    for _ in range(2):  # a shape that failed is not remembered: checked again, fails again
        with pytest.raises(ContractError):
            client.get(f"/games/{'1' * 32}/turn")
    assert checked == set()
    assert client.get(f"/games/{'2' * 32}/turn").status_code == 404
    assert checked == {("GET", "/games/{game_id}/turn", 404, "application/problem+json")}
    assert openapi_client.shape("GET", "/games/ab/turns", 200, "application/json") == (
        "GET", "/games/{game_id}/turns", 200, "application/json")  # fmt: skip


ROOT = Path(__file__).resolve().parents[2]
DOC_URI = "urn:carcassonne-cloud:openapi"


def _operations(item: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(method, op) for method, op in item.items() if method != "parameters"]


def _examples(node: Any, pointer: str = "") -> list[tuple[str, str, Any]]:
    """Every `example` in the document beside the schema it illustrates: (where, the schema's
    JSON pointer, the example). Media types, parameters and headers hold `schema` and
    `example` side by side; a schema's own `example` illustrates that schema."""
    found: list[tuple[str, str, Any]] = []
    if isinstance(node, dict):
        if "example" in node:
            if "schema" in node:
                found.append((pointer, f"{pointer}/schema", node["example"]))
            else:
                found.append((pointer, pointer, node["example"]))
        for key, value in node.items():
            escaped = str(key).replace("~", "~0").replace("/", "~1")
            found.extend(_examples(value, f"{pointer}/{escaped}"))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found.extend(_examples(value, f"{pointer}/{index}"))
    return found


def test_every_example_validates_against_its_schema(doc: dict[str, Any]) -> None:
    # The document's schemas are JSON Schema 2020-12 (OpenAPI 3.1's dialect); each example is
    # checked against the schema at its place, `$ref`s resolved in the whole document.
    registry: Registry[Any] = Registry().with_resource(
        DOC_URI, Resource.from_contents(doc, default_specification=DRAFT202012)
    )
    examples = _examples(doc)
    problems = []
    for where, schema_at, example in examples:
        validator = Draft202012Validator({"$ref": f"{DOC_URI}#{schema_at}"}, registry=registry)
        problems += [f"{where}: {e.message}" for e in validator.iter_errors(example)]
    assert not problems, "\n".join(problems)
    # Every request body and the main success answers carry one.
    with_example = {where for where, _, _ in examples}
    for path, item in doc["paths"].items():
        for method, op in _operations(item):
            escaped = path.replace("~", "~0").replace("/", "~1")
            at = f"/paths/{escaped}/{method}"
            for media in op.get("requestBody", {}).get("content", {}):
                assert f"{at}/requestBody/content/{media.replace('/', '~1')}" in with_example
    main = {
        "createGame": "201",
        "playTurn": "200",
        "getTurn": "200",
        "scoreRecord": "200",
        "importGame": "201",
        "registerWebhook": "201",
        "getBoard": "200",
        "getScores": "200",
    }
    for item in doc["paths"].values():
        for _, op in _operations(item):
            if op["operationId"] in main:
                media = op["responses"][main[op["operationId"]]]["content"]["application/json"]
                assert "example" in media, op["operationId"]
    for response in doc["components"]["responses"].values():
        if "content" in response:
            assert "example" in response["content"]["application/problem+json"]


def test_the_example_check_can_fail(doc: dict[str, Any]) -> None:
    broken = json.loads(json.dumps(doc))
    turn = broken["paths"]["/games/{game_id}/turn"]["get"]["responses"]["200"]
    turn["content"]["application/json"]["example"]["player"] = "Ann"  # a seat is a number
    with pytest.raises(AssertionError, match="~1games~1\\{game_id\\}~1turn/get/responses/200"):
        test_every_example_validates_against_its_schema(broken)


def test_one_base_url_and_each_operation_names_the_service_that_serves_it(
    doc: dict[str, Any],
) -> None:
    """One server for every operation (the proxy's public URL, tests/integration/
    test_public_url.py); `x-service` says which service stands behind each."""
    assert [s["url"] for s in doc["servers"]] == ["{baseUrl}"]
    assert doc["servers"][0]["variables"]["baseUrl"]["default"] == "http://localhost:8000"
    # One path, two services: POST /games creates (command), GET /games lists (query).
    games = doc["paths"]["/games"]
    assert games["post"]["x-service"] == "command"
    assert games["get"]["x-service"] == "query"
    assert "Served by the command service" in games["post"]["description"]
    assert "Served by the query service" in games["get"]["description"]
    for item in doc["paths"].values():
        for _, op in _operations(item):
            assert op["x-service"] in ("command", "query"), op["operationId"]
            assert "servers" not in op, op["operationId"]


def test_serving_the_document_loads_nothing_of_the_other_service(redis_url: str) -> None:
    """The query process serves the checked-in file: it never imports the command service (nor
    the builder, which imports both)."""
    script = (
        "import sys, json\n"
        "from services.query.app import create_app\n"
        f"app = create_app({{'REDIS_URL': {redis_url!r}}})\n"
        "reply = app.test_client().get('/openapi.json')\n"
        "assert reply.status_code == 200, reply.status_code\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith(('services', 'tools')))))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60, cwd=ROOT)  # fmt: skip
    assert done.returncode == 0, done.stderr
    loaded = json.loads(done.stdout.splitlines()[-1])
    assert "services.query.app" in loaded
    assert not [m for m in loaded if m.startswith(("services.command", "tools"))], loaded
