"""Every deployment runs every part: each Celery queue the code declares has a worker of its app
consuming it, and each app with a beat schedule has exactly one beat — in docker-compose.yml,
in deploy/k8s/, and in `make run` / `make run-cluster` (the supervisord programs that
deploy/local/run.py writes).

Docker and Kubernetes are not on the development machines, so nothing else would notice a
manifest that forgot a part: a queue nobody consumes fails nowhere, its tasks just wait for
ever (a game with a bot seat never moved on Compose or Kubernetes before this test).

What the code defines is read from the Celery apps themselves (every services/*/celery_app.py):
`task_default_queue` and `task_queues` (services/common/celery_conf.py declares them), the
queue Celery's own router picks for each beat entry, and `beat_schedule`. What a deployment
runs is read from its files: each process's command line, parsed as the `celery` CLI does.
"""

from __future__ import annotations

import configparser
import importlib
import re
import shlex
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from deploy.local import run
from deploy.local.supervise import render
from services.scoring.config import from_env as scoring_settings

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
K8S = ROOT / "deploy" / "k8s"


@dataclass(frozen=True)
class CeleryApp:
    """What one Celery app of the code asks of a deployment."""

    module: str  # as `celery -A` names it
    queues: frozenset[str]  # every queue its tasks go to (declared, or routed by beat)
    declared: frozenset[str]  # what a worker without -Q consumes
    beat: bool  # whether it has a beat schedule


@dataclass(frozen=True)
class Process:
    """A `celery` process a deployment runs: `replicas` copies of one worker or beat."""

    where: str  # the Compose service, Kubernetes workload or supervisord program
    app: str
    kind: str  # "worker" or "beat" (a worker run with -B counts as both)
    queues: frozenset[str] | None  # -Q; None: every queue its app declares
    replicas: int = 1
    embedded_beat: bool = False


def celery_apps() -> list[CeleryApp]:
    """Every services/*/celery_app.py, imported: its queues and whether it has a schedule."""
    apps = []
    for path in sorted((ROOT / "services").glob("*/celery_app.py")):
        module = f"services.{path.parent.name}.celery_app"
        app = importlib.import_module(module).app
        conf = app.conf  # read before routing: the router adds the queues it makes up
        declared = frozenset({conf.task_default_queue, *(q.name for q in conf.task_queues or ())})
        routed = {
            app.amqp.router.route(dict(entry.get("options", {})), entry["task"])["queue"].name
            for entry in conf.beat_schedule.values()
        }
        apps.append(CeleryApp(module, declared | routed, declared, bool(conf.beat_schedule)))
    return apps


def parse_celery(argv: list[str], where: str, replicas: int = 1) -> Process | None:
    """The worker or beat a command line starts (`celery …` or `python -m celery …`, options as
    `-A x`, `-Ax`, `--app x`, `--app=x`), or None when it starts neither."""
    words = [w for w in argv if w]
    starts = [i for i, w in enumerate(words) if w == "celery" or w.endswith("/celery")]
    if not starts:
        return None
    options: dict[str, str] = {}
    kind, flags, rest = "", set[str](), iter(words[starts[0] + 1 :])
    aliases = {"-A": "--app", "-Q": "--queues", "-B": "--beat", "-b": "--broker"}
    # celery's options that take a value and may come before the subcommand (after it, the
    # values of a worker's options are skipped as words once the subcommand is known)
    valued = {"--broker", "--result-backend", "--loader", "--config", "--workdir"}
    for word in rest:
        name, eq, value = word.partition("=")
        if word[:2] in aliases and len(word) > 2 and not eq:  # -Aservices…, -Qbots
            name, value, eq = word[:2], word[2:], "="
        name = aliases.get(name, name)
        if name in ("--app", "--queues"):
            options[name] = value if eq else next(rest, "")
        elif name in valued and not eq:
            next(rest, "")
        elif name.startswith("-"):
            flags.add(name)
        elif not kind:
            kind = word
    if kind not in ("worker", "beat") or "--app" not in options:
        return None
    queues = options.get("--queues")
    found = frozenset(q.strip() for q in queues.split(",") if q.strip()) if queues else None
    return Process(where, options["--app"], kind, found, replicas, "--beat" in flags)


def missing(apps: Iterable[CeleryApp], processes: Iterable[Process]) -> list[str]:
    """What a deployment lacks: a queue no worker of its app consumes, an app whose schedule no
    beat sends or two beats send (every sweep sent twice), a process of an app that is not."""
    processes, apps = list(processes), list(apps)
    known = {a.module for a in apps}
    wrong = [f"{p.where}: runs {p.app}, no Celery app" for p in processes if p.app not in known]
    for a in apps:
        mine = [p for p in processes if p.app == a.module]
        consumed = set().union(*(p.queues or a.declared for p in mine if p.kind == "worker"))
        wrong += [
            f"no worker of {a.module} consumes queue {q!r}" for q in sorted(a.queues - consumed)
        ]
        beats = sum(p.replicas for p in mine if p.kind == "beat" or p.embedded_beat)
        if a.beat and beats != 1:
            wrong.append(f"{beats} beats of {a.module} (its schedule needs exactly one)")
    return wrong


def expand_compose(text: str, environ: Mapping[str, str] | None = None) -> str:
    """Compose's interpolation as the file ships (`${X:-default}`, `${X-default}`, `${X}`, `$$`)
    from `environ` (none: every default)."""
    env = environ or {}

    def one(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        name, op, default = m.group("name"), m.group("op"), m.group("default") or ""
        value = env.get(name)
        return value if value is not None and (value or op != ":-") else default

    pattern = r"\$\$|\$\{(?P<name>\w+)(?:(?P<op>:?-)(?P<default>[^}]*))?\}"
    return re.sub(pattern, one, text)


def argv_of(command: Any) -> list[str]:
    """A command as a list (Compose also takes one string, split as a shell would)."""
    return shlex.split(command) if isinstance(command, str) else [str(w) for w in command or ()]


def compose_processes(path: Path = COMPOSE) -> Iterator[Process]:
    """The celery processes of a Compose file (`deploy.replicas`, else `scale`, else one)."""
    services = yaml.safe_load(expand_compose(path.read_text()))["services"]
    for name, service in services.items():
        replicas = int((service.get("deploy") or {}).get("replicas", service.get("scale", 1)))
        found = parse_celery(argv_of(service.get("command")), name, replicas)
        if found is not None:
            yield found


def k8s_processes(directory: Path = K8S) -> Iterator[Process]:
    """The celery containers of every workload the kustomization lists (a workload scaled by
    an HPA counts as two replicas: what matters here is whether there can be more than one)."""
    resources = yaml.safe_load((directory / "kustomization.yaml").read_text())["resources"]
    docs = [d for r in resources for d in yaml.safe_load_all((directory / r).read_text()) if d]
    hpas = [d for d in docs if d["kind"] == "HorizontalPodAutoscaler"]
    scaled = {d["spec"]["scaleTargetRef"]["name"] for d in hpas}
    for doc in docs:
        if doc["kind"] not in ("Deployment", "StatefulSet", "DaemonSet"):
            continue
        name = doc["metadata"]["name"]
        replicas = 2 if name in scaled else int(doc["spec"].get("replicas", 1))
        for container in doc["spec"]["template"]["spec"]["containers"]:
            argv = argv_of(container.get("command")) + argv_of(container.get("args"))
            found = parse_celery(argv, f"{name}/{container['name']}", replicas)
            if found is not None:
                yield found


def supervisord_processes(tmp: Path, *args: str) -> Iterator[Process]:
    """The celery programs of the supervisord.conf `make run` (with `args`) writes."""
    a = run.parse_args(["--var", str(tmp), *args])
    conf = configparser.RawConfigParser()
    conf.read(render([run.store_stage(a), run.app_stage(a, None)], tmp))
    for section in conf.sections():
        if section.startswith("program:"):
            argv = shlex.split(conf[section]["command"])
            found = parse_celery(argv, section.removeprefix("program:"))
            if found is not None:
                yield found


@pytest.fixture(autouse=True)
def shipped_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    """The deployments as they ship: no WORKER_QUEUES of the machine's environment."""
    for name in ("WORKER_QUEUES", "WORKER_CONCURRENCY", "REDIS_URL", "BROKER_URL"):
        monkeypatch.delenv(name, raising=False)


def test_the_code_defines_the_queues_and_schedules_the_deployments_are_checked_against() -> None:
    """The apps are found and read (an empty list would make every deployment pass)."""
    apps = {a.module: a for a in celery_apps()}
    assert set(apps) == {"services.scoring.celery_app", "services.bots.celery_app"}
    assert apps["services.scoring.celery_app"].queues == {"scoring", "webhooks"}
    assert apps["services.bots.celery_app"].queues == {"bots"}
    assert all(a.beat for a in apps.values())


@pytest.mark.parametrize(
    "deployment",
    ["docker-compose.yml", "deploy/k8s", "make run", "make run-cluster"],
)
def test_every_queue_has_a_worker_and_every_schedule_one_beat(
    deployment: str, tmp_path: Path
) -> None:
    processes = {
        "docker-compose.yml": lambda: compose_processes(),
        "deploy/k8s": lambda: k8s_processes(),
        "make run": lambda: supervisord_processes(tmp_path),
        "make run-cluster": lambda: supervisord_processes(tmp_path, "--cluster"),
    }[deployment]()
    found = list(processes)
    assert found, f"{deployment}: no celery process found at all"
    wrong = missing(celery_apps(), found)
    assert not wrong, f"{deployment}: " + "; ".join(wrong)


# The check itself, on deployments made to lack something: each gap is named.


def test_the_check_names_each_queue_and_beat_a_deployment_lacks(tmp_path: Path) -> None:
    compose = tmp_path / "docker-compose.yml"
    compose.write_text(
        """
services:
  worker:
    command: ["celery", "--app=services.scoring.celery_app", "worker",
              "--queues=${WORKER_QUEUES:-scoring}"]
  beat:
    command: celery -A services.scoring.celery_app beat
    deploy: {replicas: 2}
  bots-beat:
    command: ["python", "-m", "celery", "-Aservices.bots.celery_app", "beat"]
"""
    )
    assert missing(celery_apps(), compose_processes(compose)) == [
        "no worker of services.bots.celery_app consumes queue 'bots'",
        "no worker of services.scoring.celery_app consumes queue 'webhooks'",
        "2 beats of services.scoring.celery_app (its schedule needs exactly one)",
    ]


def test_a_worker_without_queues_consumes_every_queue_its_app_declares() -> None:
    apps = celery_apps()
    everything = [
        Process("w", "services.scoring.celery_app", "worker", None, embedded_beat=True),
        Process("b", "services.bots.celery_app", "worker", None, embedded_beat=True),
    ]
    assert missing(apps, everything) == []
    wrong_app = [
        Process("w", "services.bots.celery_app", "worker", frozenset({"scoring", "webhooks"})),
        Process("b", "services.scoring.celery_app", "worker", frozenset({"bots"})),
    ]
    assert missing(apps, wrong_app) == [  # a queue is consumed only by a worker of its app
        "no worker of services.bots.celery_app consumes queue 'bots'",
        "0 beats of services.bots.celery_app (its schedule needs exactly one)",
        "no worker of services.scoring.celery_app consumes queue 'scoring'",
        "no worker of services.scoring.celery_app consumes queue 'webhooks'",
        "0 beats of services.scoring.celery_app (its schedule needs exactly one)",
    ]


def test_a_k8s_beat_scaled_by_an_autoscaler_counts_as_more_than_one(tmp_path: Path) -> None:
    (tmp_path / "kustomization.yaml").write_text("resources: [beat.yaml]\n")
    (tmp_path / "beat.yaml").write_text(
        """
kind: Deployment
metadata: {name: beat}
spec:
  replicas: 1
  template:
    spec:
      containers:
        - name: beat
          command: [celery]
          args: [--app, services.bots.celery_app, beat]
---
kind: HorizontalPodAutoscaler
metadata: {name: beat}
spec: {scaleTargetRef: {name: beat}}
"""
    )
    (found,) = k8s_processes(tmp_path)
    assert (found.app, found.kind, found.replicas) == ("services.bots.celery_app", "beat", 2)


def test_command_lines_are_read_as_the_celery_cli_reads_them() -> None:
    argv = ["celery", "-b", "redis://x", "-Aservices.bots.celery_app", "worker", "-Qbots", "-B"]
    assert parse_celery(argv, "w") == Process(
        "w", "services.bots.celery_app", "worker", frozenset({"bots"}), embedded_beat=True
    )
    argv = ["/venv/bin/celery", "--app", "a", "--broker=redis://x", "beat", "-s", "worker"]
    assert parse_celery(argv, "b") == Process("b", "a", "beat", None)
    assert parse_celery(["celery", "-A", "a", "inspect", "ping"], "x") is None
    assert parse_celery(["gunicorn", "services.command.wsgi:app"], "x") is None


def test_compose_interpolation_takes_the_shipped_defaults() -> None:
    text = "${A:-x,y} ${B-z} ${C} $$HOSTNAME"
    assert expand_compose(text) == "x,y z  $HOSTNAME"
    assert expand_compose(text, {"A": "", "B": "", "C": "c"}) == "x,y  c $HOSTNAME"


def test_the_feed_watcher_starts_after_the_workers_pool_forked() -> None:
    """The bot worker is prefork: its feed watcher thread must start after the pool forked
    its children, or a child forked while the thread held a lock (a client pool's, a
    logger's) inherits it held and hangs on its first task (one CI run needed SIGKILL to
    stop the bot worker). Both workers' watch steps come after the pool."""
    from services.bots.celery_app import app as bots
    from services.scoring.celery_app import app as scoring

    for app in (bots, scoring):
        worker = app.WorkController(app=app, pool_cls="prefork", concurrency=1)
        order = [step.name for step in worker.blueprint.order]
        watch = next(i for i, name in enumerate(order) if name.endswith("WatchStep"))
        assert order.index("celery.worker.components.Pool") < watch, order


def test_every_part_that_reads_the_archive_reads_the_same_one() -> None:
    """Issue 28: the worker archives, command and query read archived games: in Compose all
    of them get one ARCHIVE_URL, a PostgreSQL service the file runs (healthy before the app
    starts); in Kubernetes one ARCHIVE_URL in the ConfigMap every part reads. (Without a
    shared one each container would default to its own SQLite file: archived games would be
    unknown to the others.)"""
    services = yaml.safe_load(expand_compose(COMPOSE.read_text()))["services"]
    readers = {
        n: s for n, s in services.items() if n.startswith(("command", "query", "worker", "beat"))
    }
    assert len(readers) >= 6, sorted(readers)  # two of each HTTP service, the worker, beat
    urls = {n: str((s.get("environment") or {}).get("ARCHIVE_URL")) for n, s in readers.items()}
    (url,) = set(urls.values())  # one, for all of them
    assert url.startswith("postgresql://"), urls
    host = url.split("@", 1)[1].split(":", 1)[0]
    assert host in services and "healthcheck" in services[host]
    assert all(host in (s.get("depends_on") or {}) for s in readers.values())
    configmap = yaml.safe_load((K8S / "configmap.yaml").read_text())
    assert configmap["data"]["ARCHIVE_URL"].startswith("postgresql://")
    # With one archive for all, games are archived (ARCHIVE_RUN on, as by default).
    assert scoring_settings({})["ARCHIVE_RUN"] is True
    for where, env in (("compose", services["beat"]["environment"]), ("k8s", configmap["data"])):
        assert scoring_settings({"ARCHIVE_RUN": str(env["ARCHIVE_RUN"])})["ARCHIVE_RUN"], where
    for part in ("command", "query", "worker"):
        doc = next(
            d
            for d in yaml.safe_load_all((K8S / f"{part}.yaml").read_text())
            if d and d["kind"] in ("Deployment", "StatefulSet")
        )
        sources = [
            e.get("configMapRef", {}).get("name")
            for c in doc["spec"]["template"]["spec"]["containers"]
            for e in c.get("envFrom", [])
        ]
        assert "carcassonne-env" in sources, (part, sources)


ROLE_OF = {"command": "command", "query": "query", "worker": "worker", "beat": "worker",
           "bots": "worker", "bots-beat": "worker"}  # fmt: skip


def role_of(name: str) -> str:
    """The Redis user a part connects as, by its name (command-1, query-2, bots-beat, …)."""
    return ROLE_OF[name if name in ROLE_OF else name.rsplit("-", 1)[0]]


def test_every_part_connects_to_redis_as_its_roles_user(tmp_path: Path) -> None:
    """Issue 32, finding 11: in Compose, Kubernetes and `make run` each part's REDIS_URL names
    its role's Redis user (services/redis_store/acl.py) and every BROKER_URL the broker's;
    Compose's Redis starts with the ACL file the code writes from the same passwords."""
    from services.redis_store.acl import user_of

    services = yaml.safe_load(expand_compose(COMPOSE.read_text()))["services"]
    parts = {n: s for n, s in services.items() if n.startswith(tuple(ROLE_OF))}
    assert len(parts) >= 8, sorted(parts)
    passwords = services["redis-acl"]["environment"]
    assert "services.redis_store.acl" in " ".join(argv_of(services["redis-acl"]["command"]))
    assert "--aclfile" in services["redis"]["command"]
    assert "redis-acl" in services["redis"]["depends_on"]
    for name, service in parts.items():
        env = service["environment"]
        for key, role in (("REDIS_URL", role_of(name)), ("BROKER_URL", "broker")):
            assert user_of(env[key]) == role, (name, key)
            secret = env[key].partition("://")[2].rpartition("@")[0].partition(":")[2]
            assert secret == passwords[f"REDIS_{role.upper()}_PASSWORD"], (name, key)
    # Kubernetes: each workload reads its role's Secret, whose URLs name that user.
    resources = yaml.safe_load((K8S / "kustomization.yaml").read_text())["resources"]
    assert "redis-users.yaml" in resources
    assert "REDIS_URL" not in yaml.safe_load((K8S / "configmap.yaml").read_text())["data"]
    secrets = {
        d["metadata"]["name"]: d["stringData"]
        for d in yaml.safe_load_all((K8S / "redis-users.yaml").read_text())
    }
    for part in ROLE_OF:
        doc = next(d for d in yaml.safe_load_all((K8S / f"{part}.yaml").read_text())
                   if d and d["kind"] in ("Deployment", "StatefulSet"))  # fmt: skip
        (container,) = doc["spec"]["template"]["spec"]["containers"]
        refs = [e["secretRef"]["name"] for e in container["envFrom"] if "secretRef" in e]
        assert refs == [f"carcassonne-redis-{role_of(part)}"], (part, refs)
        data = secrets[refs[0]]
        assert user_of(data["REDIS_URL"]) == role_of(part)
        assert user_of(data.get("BROKER_URL", "redis://broker:x@h/0")) == "broker"
    # make run: the supervisord programs' own REDIS_URL and the broker's user.
    a = run.parse_args(["--var", str(tmp_path)])
    stages = [run.store_stage(a), run.app_stage(a, None)]
    for program in stages[1].programs:
        assert user_of(program.env["REDIS_URL"]) == role_of(program.name), program.name
    assert user_of(a.broker) == "broker" and (tmp_path / "redis-users" / "users.acl").exists()
    assert any("--aclfile" in p.argv for p in stages[0].programs)


def test_every_redis_with_an_append_only_file_is_guarded_against_a_torn_script(tmp_path) -> None:
    """make run's Redis starts through deploy/local/aof.py (it cuts a torn MULTI block off the
    file first); Compose's, with no Python in its image, refuses a torn file instead
    (tests/integration/test_aof_repair.py runs both against real servers)."""
    from deploy.local.cluster import AOF_REPAIR

    command = yaml.safe_load(expand_compose(COMPOSE.read_text()))["services"]["redis"]["command"]
    assert command[command.index("--aof-load-truncated") + 1] == "no"
    a = run.parse_args(["--var", str(tmp_path)])
    redis_programs = [p for p in run.store_stage(a).programs if "--appendonly" in p.argv]
    assert redis_programs
    for program in redis_programs:
        persistent = program.argv[program.argv.index("--appendonly") + 1] == "yes"
        assert (str(AOF_REPAIR) in program.argv) == persistent, program.argv
