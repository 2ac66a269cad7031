"""Every shell block of README.md, deploy/README.md and docs/*.md, executed as written against
a real suite started as `make run` starts it (nginx in front when installed: one base URL).

A block is a fenced ```sh, ```bash, ```console or ```shell block. Each one either runs here
or has `<!-- not run: <why> -->` on the line before it (Docker, a server that runs until
stopped, a half-hour benchmark …); commands in a fence of another language (or none) fail the
test, and so does a marked block that does not say why. A doc's blocks run
in order in one `bash -euo pipefail` session (they build on each other: a key made in one is
sent by the next), in a directory of their own that sees the repository's files (`.venv/…`,
`deploy/…`), with what the docs tell a reader to have set: `BASE` (the public URL), the
`REDIS_URL` of that suite (for the key CLI) and, where a doc says so, `GAME` and `KEY`
(`DOC_VARIABLES`). Every `curl` fails on an HTTP error status (`--fail-with-body` unless the
block already says `-f`). When a block is followed by a ```json block (the answer it shows),
every JSON value the block prints has that answer's shape: the same keys (a `"…"` key allows
more), and values of the same kind (ids, counts and times differ); so does a value a block's
comment shows on a line of its own (`# {"replayed":true}`). A server the docs start by hand
(marked: it runs until stopped) is one `make run` starts, with the same arguments."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from deploy.local.host import free_ports
from services.redis_store.acl import local_url
from tests.integration.http_client import call
from tests.integration.test_suite_run import Runner, suite_runner

pytestmark = [pytest.mark.integration, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", ROOT / "deploy" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELL = {"sh", "bash", "console", "shell"}
NOT_RUN = re.compile(r"<!-- not run: (?P<why>[^>]+?) -->")
OPENING = re.compile(r"^(?P<indent> *)```(?P<lang>[\w+-]*)\s*$")
# Curl fails on an HTTP error status, with the body shown, unless the block asks for -f itself.
CURL = """curl() {
  local a
  for a in "$@"; do
    case $a in --fail|--fail-with-body|-[!-]*f*) command curl "$@"; return;; esac
  done
  command curl --fail-with-body "$@"
}
"""


@dataclass
class Block:
    """One fenced block of a doc: where it starts, its language and text, the reason it is
    not run (if marked) and the JSON answer shown right after it (if any)."""

    doc: Path
    line: int
    lang: str
    body: str
    not_run: str | None = None
    answer: str | None = None

    def where(self) -> str:
        return f"{self.doc.relative_to(ROOT)}:{self.line}"


def blocks(doc: Path) -> list[Block]:
    """Every fenced block of `doc`, in order; an answer is a ```json block that follows a
    shell block with at most one line ending in ':' between them."""
    lines = doc.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    between: list[str] = []  # the lines since the last block ended
    i = 0
    while i < len(lines):
        opening = OPENING.match(lines[i])
        if opening is None:
            between.append(lines[i])
            i += 1
            continue
        indent, close = opening["indent"], i + 1
        while lines[close].rstrip() != indent + "```":
            close += 1
        text = [line.removeprefix(indent) for line in lines[i + 1 : close]]
        before = [line for line in between if line.strip()]
        marker = NOT_RUN.search(before[-1]) if before else None
        block = Block(doc, i + 1, opening["lang"], "\n".join(text) + "\n",
                      marker["why"] if marker else None)  # fmt: skip
        previous = found[-1] if found else None
        close_by = not before or (len(before) == 1 and before[0].rstrip().endswith(":"))
        if block.lang == "json" and previous is not None and previous.lang in SHELL and close_by:
            previous.answer = block.body
        found.append(block)
        between = []
        i = close + 1
    return found


def shell_blocks(doc: Path) -> list[Block]:
    return [b for b in blocks(doc) if b.lang in SHELL]


def values(text: str) -> Iterator[Any]:
    """The JSON values in `text`, one after another (separated by whitespace or not)."""
    decoder, at = json.JSONDecoder(), 0
    while at < len(text):
        if text[at].isspace():
            at += 1
            continue
        value, at = decoder.raw_decode(text, at)
        yield value


def same_shape(shown: Any, real: Any, path: str = "$") -> list[str]:
    """How `real` differs in shape from the answer a doc shows: keys (a shown `"…"` key
    allows others), kinds of values (a null, shown or real, stands for anything: a nullable
    field; so does a shown "…"), list items pairwise."""
    if shown is None or real is None or shown == "…":
        return []
    if isinstance(shown, bool) or isinstance(real, bool):
        same = isinstance(shown, bool) and isinstance(real, bool)
    elif isinstance(shown, int | float):
        same = isinstance(real, int | float)
    else:
        same = type(real) is type(shown)
    if not same:
        return [f"{path}: shown {json.dumps(shown)[:40]}, got {json.dumps(real)[:60]}"]
    if isinstance(shown, dict) and isinstance(real, dict):
        missing = [k for k in shown if k not in real and k != "…"]
        extra = [] if "…" in shown else [k for k in real if k not in shown]
        wrong = [f"{path}: missing {missing}"] if missing else []
        wrong += [f"{path}: not shown {extra}"] if extra else []
        for key in shown.keys() & real.keys():
            wrong += same_shape(shown[key], real[key], f"{path}.{key}")
        return wrong
    if isinstance(shown, list) and isinstance(real, list):
        return [w for n, (s, r) in enumerate(zip(shown, real, strict=False))
                for w in same_shape(s, r, f"{path}[{n}]")]  # fmt: skip
    return []


def comment_answers(block: Block) -> list[Any]:
    """The answers a block shows as comments of their own: `# {"over":true,…}: …` (JSON up to
    its end; a comment that is not JSON, such as one with `…` in it, is prose)."""
    found = []
    for line in block.body.splitlines():
        if (start := re.match(r"\s*# (?=\{)", line)) is not None:
            try:
                found.append(json.JSONDecoder().raw_decode(line, start.end())[0])
            except json.JSONDecodeError:
                continue
    return found


def test_every_shell_block_is_run_or_marked() -> None:
    """Each block either runs here or says why not; the counts, per doc."""
    counts = {}
    for doc in DOCS:
        found = shell_blocks(doc)
        for block in found:
            if block.not_run is not None:
                assert len(block.not_run) > 10, f"{block.where()}: say why it is not run"
        if found:
            marked = sum(b.not_run is not None for b in found)
            counts[doc.relative_to(ROOT).as_posix()] = (len(found) - marked, marked)
    assert counts
    for name, (run, marked) in counts.items():
        print(f"{name}: {run} blocks run, {marked} marked not run")
    command = re.compile(r"\s*(curl|\.venv/|make |[A-Z_]+=\S* \.venv)")
    untagged = [b.where() for doc in DOCS for b in blocks(doc)
                if b.lang not in SHELL and command.match(b.body)]  # fmt: skip
    assert not untagged, f"commands in a fence that is not ```sh: {untagged}"


# What a doc tells its reader to have set before its blocks, besides BASE and REDIS_URL:
# `quick start` is the game README's quick start plays (its GAME: README runs first),
# `imported` README's 3-turn record imported (docs/integration.md), `key` a key made with the
# key CLI (docs/integration.md, "API keys").
DOC_VARIABLES = {
    "docs/clocks.md": {"KEY": "key"},
    "docs/lifecycle.md": {"KEY": "key"},
    "docs/lobby.md": {"KEY": "key"},
    "docs/pictures.md": {"GAME": "quick start"},
    "docs/query.md": {"GAME": "imported", "KEY": "key"},
    "docs/subscriptions.md": {"KEY": "key"},
}


@dataclass
class Session:
    """A doc's blocks run in one shell: which, its output, exit status and time."""

    run: list[Block]
    done: subprocess.CompletedProcess[str]
    seconds: float

    def failed(self) -> str:
        done = self.done
        return (f"a block failed (the last '@@' on stderr names it), exit {done.returncode}\n"
                f"--- stdout\n{done.stdout[-3000:]}\n"
                f"--- stderr\n{done.stderr[-3000:]}")  # fmt: skip

    def outputs(self) -> list[str]:
        """Each block's output, by the separators the session printed."""
        parts = re.split(r"\n@@block \d+\n", self.done.stdout)[1:]
        parts[-1] = parts[-1].split("\n@@end ")[0]
        assert len(parts) == len(self.run)
        return parts

    def game(self) -> str:
        """The GAME the blocks left set."""
        return self.done.stdout.rsplit("\n@@end GAME=", 1)[1].strip()


@dataclass
class Suite:
    runner: Runner
    env: dict[str, str]
    work: Path
    known: dict[str, str]  # the values DOC_VARIABLES names
    readme: Session | None = None

    def session(self, doc: Path) -> Session:
        """Run a doc's blocks in order in one shell, with what the doc says to have set."""
        run = [b for b in shell_blocks(doc) if b.not_run is None]
        script = CURL
        for n, block in enumerate(run):
            script += f"printf '\\n@@block {n}\\n'; echo '@@ {block.where()}' >&2\n{block.body}"
        script += "printf '\\n@@end GAME=%s\\n' \"${GAME-}\"\n"
        names = DOC_VARIABLES.get(doc.relative_to(ROOT).as_posix(), {})
        env = {**self.env, **{name: self.known[what] for name, what in names.items()}}
        started = time.monotonic()
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=self.work, env=env,
                              capture_output=True, text=True, timeout=120)  # fmt: skip
        return Session(run, done, time.monotonic() - started)


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Suite]:
    """A suite as `make run` starts it; a directory that sees the repository; an API key
    made with the key CLI; README's blocks run (its quick start plays the game other docs
    draw) and README's record imported with the key."""
    base = tmp_path_factory.mktemp("docs")
    ports = free_ports(3)
    runner = suite_runner(base / "var", (ports[0], ports[1], ports[2]))
    family: set[int] = set()
    try:
        runner.wait_for("all healthy", timeout=120)
        family = runner.family()
        work = base / "work"
        work.mkdir()
        for entry in ROOT.iterdir():  # blocks name .venv/…, deploy/…; their files land here
            if entry.name not in (".git", "var"):
                (work / entry.name).symlink_to(entry)
        own = ("ADDRESS_WRITE_RATE", "API_KEY_RATE", "GAME", "KEY")  # as a reader has them
        env = {k: v for k, v in os.environ.items() if k not in own}
        # The key CLI reaches the suite's Redis as its admin user (the default user is off).
        admin = local_url("admin", base / "var" / "redis-users")
        assert admin is not None and admin.endswith(f"@127.0.0.1:{ports[0]}/0")
        env.update(BASE=f"http://127.0.0.1:{ports[1]}", REDIS_URL=admin)
        suite = Suite(runner, env, work, {})
        cli = [".venv/bin/python", "-m", "services.command.apikeys"]  # docs/integration.md
        made = subprocess.run([*cli, "create", "--name", "docs", "--json"], cwd=work, env=env,
                              capture_output=True, text=True, check=True)  # fmt: skip
        suite.known["key"] = json.loads(made.stdout)["key"]
        suite.readme = suite.session(ROOT / "README.md")
        if suite.readme.done.returncode == 0:
            suite.known["quick start"] = suite.readme.game()
        record = next(b for b in blocks(ROOT / "README.md") if '"carcassonne-record/1"' in b.body)
        status, imported = call(suite.env["BASE"], "POST", "/games/import", json.loads(record.body),
                                {"X-Api-Key": suite.known["key"]})  # fmt: skip
        assert status == 201, imported
        suite.known["imported"] = imported["game_id"]
        yield suite
    finally:
        runner.clean_up(family)


RUN = [doc for doc in DOCS if any(b.not_run is None for b in shell_blocks(doc))]


@pytest.mark.parametrize("doc", RUN, ids=[d.relative_to(ROOT).as_posix() for d in RUN])
def test_the_shell_blocks_of_a_doc_run_as_written(doc: Path, suite: Suite) -> None:
    name = doc.relative_to(ROOT).as_posix()
    if name in ("docs/pictures.md",):
        assert "quick start" in suite.known, "README's blocks failed: no GAME to draw"
    ran = suite.readme if name == "README.md" and suite.readme else suite.session(doc)
    assert ran.done.returncode == 0, f"{name}: {ran.failed()}"
    checked = 0
    for block, output in zip(ran.run, ran.outputs(), strict=True):
        if block.answer is not None:
            shown = json.loads(block.answer)
            real = list(values(output))
            assert real, f"{block.where()}: printed no JSON, the doc shows an answer"
            for value in real:
                wrong = same_shape(shown, value)
                assert not wrong, f"{block.where()}: not the answer shown: {wrong} in {value}"
            checked += 1
        for shown in comment_answers(block):
            real = list(values(output))
            assert any(not same_shape(shown, value) for value in real), (
                f"{block.where()}: no answer like {json.dumps(shown)} in {real}"
            )
            checked += 1
    print(f"{name}: {len(ran.run)} blocks run in {ran.seconds:.1f} s, {checked} answers checked")


SERVERS = "checks that `make run` starts"  # in the reason of a server's block


def test_the_servers_the_docs_start_by_hand_are_those_make_run_starts(suite: Suite) -> None:
    """A block of servers that run until stopped: each command's arguments begin the
    arguments of a program `make run` runs (its supervisord.conf), assignments aside."""
    conf = (suite.runner.var / "supervisord.conf").read_text().replace("%%", "%")
    programs = [shlex.split(line.removeprefix("command="))
                for line in conf.splitlines() if line.startswith("command=")]  # fmt: skip
    checked = 0
    for block in (b for doc in DOCS for b in shell_blocks(doc) if SERVERS in (b.not_run or "")):
        for line in filter(None, (line.split("#")[0].strip() for line in block.body.splitlines())):
            words = [w for w in shlex.split(line) if not re.match(r"[A-Z_]+=", w)]
            program, args = Path(words[0]).name, words[1:]
            runs = any(real[1:3] == ["-m", program] and real[3 : 3 + len(args)] == args
                       for real in programs)  # fmt: skip
            assert runs, f"{block.where()}: make run runs no {line!r}"
            checked += 1
    assert checked >= 5
    print(f"{checked} server commands are make run's")


def test_make_run_takes_games_without_a_key_and_says_so(suite: Suite) -> None:
    """README: `make run` takes POST /games without a key and its banner names the setting;
    docs/http.md: a bad key is refused there too (anywhere else a missing key is 401)."""
    assert "DEVELOPMENT SETTING: ANONYMOUS_GAMES=1" in suite.runner.text()
    body = {"players": [{"name": "Ann"}, {"name": "Bob"}]}
    status, created = call(suite.env["BASE"], "POST", "/games", body)
    assert status == 201, created  # elsewhere 401: tests/integration/test_access_limits.py
    status, refused = call(suite.env["BASE"], "POST", "/games", body, {"X-Api-Key": "cck_no"})
    assert (status, refused["code"]) == (403, "bad_api_key")  # docs/http.md: a bad key is 403
