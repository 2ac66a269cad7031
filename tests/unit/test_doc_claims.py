"""Claims of "only" in the docs, checked against the code: a sentence that says who writes a
stream must name every writer there is (found here by reading the services' source).

The review step before a commit (README, "Tests") reads every new "only", "never", "every" or
"always" about the system's behaviour: each names the test that shows it, or gets one here.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SERVICES = ROOT / "services"


# The move stream's one write path (services/common/moves.py): a call of either writes moves.
MOVE_WRITERS = {"append_moves", "run_command"}


def writes(node: ast.AST, stream: str) -> bool:
    """`node` is a `<something>.store.append(game_id, <stream>, …)` call, or (moves) a call
    of the one write path."""
    if not isinstance(node, ast.Call):
        return False
    if isinstance(node.func, ast.Name):
        return stream == "MOVES" and node.func.id in MOVE_WRITERS
    return (
        isinstance(node.func, ast.Attribute)
        and node.func.attr == "append"
        and len(node.args) >= 2
        and isinstance(node.args[1], ast.Name)
        and node.args[1].id == stream
    )


def writers(stream: str) -> set[str]:
    """The service packages that write the stream (services/common holds the write path,
    which writes for its callers: it is none of them)."""
    found: set[str] = set()
    for path in SERVICES.rglob("*.py"):
        package = path.relative_to(SERVICES).parts[0]
        if package == "common":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if writes(node, stream):
                found.add(package)
    return found


def test_the_readme_names_every_writer_of_the_move_and_score_streams() -> None:
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    moves = re.search(r"a \*\*move stream\*\* \(([^)]*)\)", readme)
    scores = re.search(r"a \*\*score stream\*\* \(([^)]*)\)", readme)
    assert moves and scores, "README: the event store section names each stream's writers"
    # services/<package> -> how the README names the process that runs it
    names = {"command": "command service", "bots": "bot worker", "scoring": "turn timer"}
    assert writers("MOVES") == {"command", "bots", "scoring"}
    assert all(names[p] in moves.group(1) for p in writers("MOVES")), moves.group(1)
    assert writers("SCORES") == {"scoring"}
    assert scores.group(1) == "written only by the scoring worker"


def test_no_service_sends_the_scoring_worker_a_task_as_its_docstring_says() -> None:
    from services.scoring import celery_app

    doc = celery_app.__doc__ or ""
    assert "No one sends the worker a task per move" in doc
    assert "scoring.catch_up" not in doc or "tests" in doc.split("scoring.catch_up", 1)[1][:200]
    root = Path(__file__).resolve().parents[2] / "services"
    senders = [
        str(path.relative_to(root))
        for path in root.rglob("*.py")
        if path.parent.name != "scoring" and re.search(r"[\"']scoring\.\w+[\"']", path.read_text())
    ]
    assert senders == []
