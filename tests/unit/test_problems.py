"""Errors as RFC 9457 problem details (services/common/problems.py): every code the code
base raises has a section on /errors, and the proxy's own errors are the same shape."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

from services.common.http_errors import HTTP_CODES, UNPROCESSABLE
from services.common.problems import FAMILY_OF, HINTS, page, problem, type_uri

ROOT = Path(__file__).resolve().parents[2]
CODE = re.compile(r"[a-z]+(_[a-z0-9]+)+")


def raised_codes() -> set[str]:
    """Code-like string literals passed first to an exception raised anywhere in services/
    or shared/ (or to `error_response`, or to a GameError subclass's own __init__)."""
    found: set[str] = set()
    for path in [*(ROOT / "services").rglob("*.py"), *(ROOT / "shared").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            calls: list[ast.Call] = []
            if isinstance(node, ast.Raise) and node.exc is not None:
                calls = [c for c in ast.walk(node.exc) if isinstance(c, ast.Call)]
            elif isinstance(node, ast.Call):
                func = node.func
                name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
                if name in ("error_response", "__init__"):
                    calls = [node]
            for call in calls:
                first = call.args[0] if call.args else None
                value = first.value if isinstance(first, ast.Constant) else None
                if isinstance(value, str) and CODE.fullmatch(value):
                    found.add(value)
    return found


def documented_codes() -> set[str]:
    """Codes in the "code" column of the docs' tables (some codes are raised through a
    variable, which the scan of the source does not see)."""
    found: set[str] = set()
    for doc in sorted((ROOT / "docs").glob("*.md")):
        lines = doc.read_text(encoding="utf-8").splitlines()
        column: int | None = None
        for line, after in zip(lines, [*lines[1:], ""], strict=True):
            cells = [c.strip().lower() for c in line.split("|")]
            if line.startswith("|") and after.startswith("|---"):
                column = cells.index("code") if "code" in cells else None
            elif not line.startswith("|"):
                column = None
            elif column is not None and column < len(cells):
                found |= {
                    c for c in re.findall(r"`([a-z_0-9]+)`", cells[column]) if CODE.fullmatch(c)
                }
    return found


def test_every_code_raised_has_its_own_section_on_the_errors_page() -> None:
    codes = raised_codes() | documented_codes() | set(HTTP_CODES.values()) | set(UNPROCESSABLE)
    assert len(codes) > 100  # the scan finds the codes (it would pass vacuously otherwise)
    assert sorted(codes - set(FAMILY_OF)) == []
    sections = set(re.findall(r"<section id='([a-z0-9_]+)'>", page()))
    for code in codes:
        assert type_uri(code) == f"/errors#{code}" and code in sections


def test_a_problem_has_rfc_9457_members_and_a_hint_naming_the_request_that_helps() -> None:
    body = problem("not_your_turn", "it is player 1's turn", 409, "R2.2", {"current": 1})
    assert {k: body[k] for k in ("type", "status", "detail", "code", "message", "rule")} == {
        "type": "/errors#not_your_turn", "status": 409, "detail": "it is player 1's turn",
        "code": "not_your_turn", "message": "it is player 1's turn", "rule": "R2.2",
    }  # fmt: skip
    assert body["title"] and "GET /games/{id}/turn" in body["hint"]
    assert all("'" not in hint for hint in (HINTS["retry"], HINTS["body"]))  # nginx quotes


def test_the_proxy_answers_its_own_errors_as_the_services_would() -> None:
    for conf, count in (("errors", 4), ("public", 1)):  # 413, 502, 504, 429; operators' paths
        for where in ("deploy/nginx", "deploy/k8s/nginx"):
            text = (ROOT / where / f"{conf}.conf.template").read_text(encoding="utf-8")
            bodies = re.findall(r"return (\d+) '(\{.*?\})';", text)
            assert len(bodies) == count, (where, conf)
            for status, raw in bodies:
                body = json.loads(raw)
                assert body == problem(body["code"], body["detail"], int(status)), conf
            assert text.count("default_type application/problem+json;") == count
