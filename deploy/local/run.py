"""`make run`: the whole suite on this machine, kept running by supervisord (deploy/README.md).

The `prepare` step: check the ports, render nginx's configuration, list the parts in stages for
supervise.py (Redis; the services, workers and beats; nginx once every instance behind it is
ready) and print the banner. `--cluster`: a 3-primary Redis Cluster (REDIS_PORT, +1, +2), formed
once its nodes answer, and the Celery broker on REDIS_PORT + 3.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

from deploy.local import postgres
from deploy.local.cluster import form_cluster, redis_argv
from deploy.local.host import (
    BUS,
    NGINX_INSTALL,
    command_line,
    find_nginx,
    free_port,
    nginx_binary,
    port_free,
    port_holders,
    redis_server_binary,
)
from deploy.local.nginx_conf import ROOT, nginx_argv, nginx_limits, nginx_servers, render_nginx
from deploy.local.supervise import Program, RunError, Stage, running, serve, suite_of
from services.redis_store.acl import (
    ROLES,
    load_or_make,
    server_version,
    with_user,
    write_acl,
    write_urls,
)

HEALTH = "/readyz"  # 200 once a service serves requests and reaches Redis
WARNING = """!!! DEVELOPMENT SETTING: WEBHOOK_ALLOW_PRIVATE=1 — webhook and subscription URLs may be
!!! http:// and point at loopback or private addresses (a receiver on this machine).
!!! Never set it in production (WEBHOOK_ALLOW_PRIVATE=0 make run turns it off here)."""
ANONYMOUS = """!!! DEVELOPMENT SETTING: ANONYMOUS_GAMES=1 — POST /games takes no API key: a game
!!! made without one has no owner (no key lists it by player; `"public": true` lists it on /).
!!! Never set it in production (ANONYMOUS_GAMES=0 make run asks for a key here too; a key:
!!! .venv/bin/python -m services.command.apikeys create --name <who>)."""


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line, its defaults from the environment (passed on to every part)."""
    env, parser = os.environ.get, argparse.ArgumentParser(prog="make run", description=__doc__)
    add = parser.add_argument
    add("--var", type=Path, default=ROOT / "var", help="data, logs, supervisord.conf (./var)")
    add("--redis-url", default=env("REDIS_URL"), help="use this Redis, start none (REDIS_URL)")
    add("--broker-url", default=env("BROKER_URL"), help="the Celery broker (BROKER_URL)")
    add("--redis-port", type=int, default=env("REDIS_PORT", "6390"), help="REDIS_PORT, 6390")
    add("--command-port", type=int, default=env("COMMAND_PORT", "8000"),
        help="COMMAND_PORT, 8000: the API's one public port (with nginx: every path)")  # fmt: skip
    add("--query-port", type=int, default=env("QUERY_PORT", "8001"),
        help="QUERY_PORT, 8001: the query service alone, for operators")  # fmt: skip
    add("--cluster", action="store_true", help="the event store on a 3-primary Redis Cluster")
    add("--instances", type=int, help="query instances, behind nginx (1; --cluster: 2)")
    add("--command-instances", type=int, help="command instances of one worker, behind nginx "
        "(with nginx: the cores, at least --instances; without: 1)")  # fmt: skip
    add("--worker-processes", type=int, help="scoring worker processes (1; --cluster: 2)")
    add("--no-query", action="store_true", help="do not start the query service")
    add("--no-proxy", action="store_true", help="no nginx: gunicorn serves the public ports")
    add("--nginx", default=env("NGINX"), help="the nginx binary (NGINX; default: in PATH)")
    add("--web-concurrency", type=int, help="gunicorn workers per instance (WEB_CONCURRENCY)")
    add("--concurrency", type=int, default=env("WORKER_CONCURRENCY", "2"), help="worker threads")
    add("--queues", default=env("WORKER_QUEUES", "scoring,webhooks"), help="WORKER_QUEUES")
    add("--sweep-seconds", type=float, default=env("SWEEP_SECONDS", "10"), help="SWEEP_SECONDS")
    add("--timeout", type=float, default=60.0, help="seconds for a stage to be ready (60)")
    a = parser.parse_args(argv)
    a.instances = a.instances or 1 + a.cluster
    # One command worker per instance, each game routed to one instance by nginx (its cached
    # state is then current: TRUST_CACHE); so one instance per core, not more workers.
    a.command_default = max(a.instances, os.cpu_count() or 1)
    a.worker_processes = a.worker_processes or 1 + a.cluster
    a.var, h = a.var.resolve(), "127.0.0.1"
    a.web = {"command": a.command_port} | ({} if a.no_query else {"query": a.query_port})
    a.store = f"redis+cluster://{h}:{a.redis_port},{h}:{a.redis_port + 1},{h}:{a.redis_port + 2}"
    a.store = a.store if a.cluster else a.redis_url or f"redis://{h}:{a.redis_port}/0"
    broker = f"redis://{h}:{a.redis_port + 3}/0" if a.cluster else f"redis://{h}:{a.redis_port}/1"
    a.broker = a.broker_url or ("" if a.redis_url else broker)  # "": REDIS_URL's
    # The Redis it starts has a user per role (services/redis_store/acl.py); one given by
    # REDIS_URL is used as it is, by every part.
    a.users = a.var / "redis-users"
    a.urls = {} if a.redis_url else {role: a.store for role in ROLES}
    return a


def redis_users(a: argparse.Namespace) -> Path:
    """The users of the Redis this run starts: their passwords kept in <var>/redis-users
    (made on the first run), its ACL file written for the redis-server's version, each role's
    URLs (`a.urls`, and `a.broker` the broker user's) and urls.json (what the operators' CLIs
    find when REDIS_URL is not set: services/redis_store/acl.py `local_url`). The ACL file's
    path."""
    passwords = load_or_make(a.users)
    acl = write_acl(a.users, passwords, server_version(redis_server_binary()))
    a.urls = {role: with_user(a.store, role, passwords[role]) for role in ROLES}
    a.broker = with_user(a.broker, "broker", passwords["broker"])
    write_urls(a.users, {**a.urls, "broker": a.broker})
    return acl


def check(a: argparse.Namespace, nginx: str | None) -> None:
    """Fail before anything starts, saying what to change."""
    wanted = max(a.instances, a.command_instances or 1)
    if wanted > 1 and not nginx:
        raise RunError(f"{wanted} instances need nginx in front: {NGINX_INSTALL}")
    if a.cluster and a.redis_url:
        raise RunError("--cluster starts its own Redis Cluster: unset REDIS_URL")
    wanted = [(port, f"{role.upper()}_PORT") for role, port in a.web.items()]
    if not a.redis_url:  # with --cluster: the nodes, their bus ports and the broker
        ports = [a.redis_port + i for i in range(4 if a.cluster else 1)]
        wanted += [(p, "REDIS_PORT") for p in ports]
        wanted += [(p + BUS, "REDIS_PORT") for p in ports[:3] if a.cluster]
    for port, name in wanted:
        if not port_free(port):
            raise RunError(in_use(port, name))


def in_use(port: int, name: str) -> str:
    """Who holds `port`: a running suite, said as such with where it serves (not as processes
    to kill: it is likely the one in use), or the processes holding it, by pid and command."""
    holders = port_holders(port)
    suites = sorted({v for v in map(suite_of, holders) if v is not None})
    if suites:
        suite = already_running(suites[0], running(suites[0]) or {})
        return f"port {port} ({name}) is in use by {suite}; or set {name} to another port"
    named = "; ".join(f"pid {pid} ({short(command_line(pid))})" for pid in holders)
    return f"port {port} is in use{' by ' + named if named else ''}: set {name} to another port"


def short(text: str, most: int = 80) -> str:
    """`text` on one line, cut to `most` characters."""
    line = " ".join(text.split())
    return line if len(line) <= most else line[: most - 1] + "…"


def already_running(var: Path, suite: dict[str, object]) -> str:
    """A suite running from `var`, where it serves and how to stop it (`suite`: its record)."""
    pid = f" (make run, pid {suite['pid']})" if "pid" in suite else ""
    where = f": {suite['where']}" if suite.get("where") else ""
    how = "Use it, or stop it first (Ctrl-C where it runs)"
    return f"Carcassonne Cloud, already running from {var}{pid}{where}. {how}"


def store_stage(a: argparse.Namespace) -> Stage:
    """The embedded Redis, or the cluster's primaries and the broker (nothing with REDIS_URL).
    On SIGTERM, as on SHUTDOWN, Redis fsyncs its append-only file, then exits."""
    stage = Stage("store", [], ready=a.store if a.redis_url else "")
    if a.redis_url:
        return stage
    acl = redis_users(a)  # on every node, and on the broker
    admin = a.urls["admin"].partition("://")[2].rpartition("@")[0]  # "admin:<password>"
    for i in range(1, 4) if a.cluster else ():
        port = a.redis_port + i - 1
        argv = redis_argv(port, a.var / "redis" / str(port), aof="always", cluster=True, acl=acl)
        ready = f"redis://{admin}@127.0.0.1:{port}/0"
        stage.programs.append(Program(f"redis-{i}", argv, ready, stopwaitsecs=30))
    if a.cluster:
        nodes, auth = [a.redis_port + i for i in range(3)], tuple(admin.split(":", 1))
        stage.then = lambda: "cluster " + form_cluster("127.0.0.1", nodes, 0, a.timeout, auth)
        argv = redis_argv(a.redis_port + 3, a.var / "broker", aof="everysec", acl=acl)
        ready = f"redis://{admin}@127.0.0.1:{a.redis_port + 3}/0"
        stage.programs.append(Program("broker", argv, ready, stopwaitsecs=30))
    else:  # every acknowledged write on disk before the reply
        argv = redis_argv(a.redis_port, a.var / "redis", aof="always", acl=acl)
        stage.programs.append(Program("redis", argv, a.urls["admin"], stopwaitsecs=30))
    return stage


def app_stage(a: argparse.Namespace, nginx: str | None) -> Stage:
    """The command and query instances (on private free ports behind nginx), the scoring and
    bot workers and their beats."""
    stage, taken = Stage("app", []), set(a.web.values())
    for role, public in a.web.items():
        count = a.instances
        if role == "command":
            count = a.command_instances or (a.command_default if nginx else 1)
        for i in range(1, count + 1):
            name = role if count == 1 else f"{role}-{i}"
            port = free_port(avoid=taken) if nginx else public
            taken.add(port)
            argv = [sys.executable, "-m", "gunicorn", "-c", f"deploy/gunicorn/{role}.py"]
            argv.append(f"services.{role}.wsgi:app")
            metrics = str(a.var / "metrics" / name)  # a directory per server
            env = {
                "PORT": str(port),
                "BIND": f"127.0.0.1:{port}",
                "PROMETHEUS_MULTIPROC_DIR": metrics,
                **({"REDIS_URL": a.urls[role]} if a.urls else {}),  # its role's Redis user
            }
            stage.programs.append(Program(name, argv, f"http://127.0.0.1:{port}{HEALTH}", env))
    for i in range(1, a.worker_processes + 1):
        name = "worker" if a.worker_processes == 1 else f"worker-{i}"
        args = ("-Q", a.queues, "--pool", "threads", "--concurrency", str(a.concurrency))
        stage.programs.append(celery(name, "scoring", "worker", *args))  # a cache per process
    cores = str(os.cpu_count() or 1)  # a bot's turn is CPU-bound: a process per core
    stage.programs.append(celery("bots", "bots", "worker", "-Q", "bots", "--concurrency", cores))
    for name, app in (("beat", "scoring"), ("bots-beat", "bots")):
        stage.programs.append(celery(name, app, "beat", "-s", str(a.var / f"{name}-schedule")))
    for program in stage.programs if a.urls else ():  # the workers' and beats' user
        program.env.setdefault("REDIS_URL", a.urls["worker"])
    return stage


def celery(name: str, app: str, kind: str, *args: str) -> Program:
    """A Celery worker, ready once it logs `ready.` (SIGTERM: a warm shutdown, which finishes
    the tasks it holds), or beat, ready once it logs `Starting...`."""
    argv = [sys.executable, "-m", "celery", "-A", f"services.{app}.celery_app", kind, *args]
    if kind == "worker":  # no mingle nor gossip: a second less to start, nothing needs them
        argv += ["-n", f"{name}@%h", "--without-mingle", "--without-gossip"]
    ready = r"log:@\S+ ready\.|beat: Starting"
    return Program(name, [*argv, "-l", "info"], ready, stopwaitsecs=30 if kind == "worker" else 15)


def proxy_stage(a: argparse.Namespace, nginx: str, app: Stage) -> Stage:
    """nginx in front of every instance (each game routed to one), its files under
    <var>/nginx: the API's one public port (--command-port), which routes each path and method
    to the service that serves it, and the query service alone on --query-port; ready once
    each service answers ready through it. SIGQUIT: it stops accepting and finishes the
    requests in flight (SIGKILL after 5 s)."""
    nofile, connections = nginx_limits()
    values = {"CC_WORKER_PROCESSES": "auto", "CC_NOFILE": str(nofile)}
    values["CC_WORKER_CONNECTIONS"] = str(connections)
    values["CC_ACCESS_LOG"] = f"{a.var / 'log' / 'nginx-access.log'} timed"
    for role, port in a.web.items():
        servers = [p.env["BIND"] for p in app.programs if p.name.startswith(role)]
        values[f"CC_{role.upper()}_SERVERS"] = nginx_servers(servers)
        values["CC_LISTEN" if role == "command" else "CC_QUERY_LISTEN"] = f"127.0.0.1:{port}"
    argv = nginx_argv(nginx, a.var / "nginx", render_nginx(a.var / "nginx/conf", values, [*a.web]))
    # /readyz is for operators, not on the public port: nginx is ready once it passes
    # /healthz to each service (the instances were ready before it started).
    ready = " ".join(f"http://127.0.0.1:{port}/healthz" for port in a.web.values())
    return Stage("proxy", [Program("nginx", argv, ready, stopsignal="QUIT", stopwaitsecs=5)])


def proxy_binary(explicit: str | None, say: Callable[[str], None]) -> tuple[str | None, str]:
    """(nginx, "") or (None, why not): NGINX if given, else the one installed, else installed
    here with apt-get when this runs as root (as `make test` does: deploy/local/host.py)."""
    if explicit or nginx_binary() is not None:
        return nginx_binary(explicit), ""
    if os.geteuid() == 0:
        say("make run: nginx is not installed: installing it (apt-get install nginx)")
    found, why = find_nginx()
    return found, why or ""


def served_at(
    a: argparse.Namespace, nginx: str | None, why: str, say: Callable[[str], None]
) -> str:
    """Where the suite serves, for the banner: with nginx the API's one public URL (every path)
    and the query service alone; without, two base URLs, said loudly with why."""
    if nginx:
        urls = f"API http://127.0.0.1:{a.command_port} (every path)"
        return urls + (
            "" if a.no_query else f", query service alone http://127.0.0.1:{a.query_port}"
        )
    say(f"  nginx not started ({why}): TWO base URLs, each service on its own port (apps")
    say("  must send each path to the service that serves it), and gunicorn serves them")
    say("  itself, so an idle or slow client holds a sync worker (up to CLIENT_TIMEOUT)")
    return ", ".join(f"{role} http://127.0.0.1:{port}" for role, port in a.web.items())


def main(argv: Sequence[str] | None = None) -> int:
    """Run the suite until Ctrl-C or SIGTERM (exit 0), or until a part keeps dying (exit 1)."""
    a = parse_args(argv)
    if (suite := running(a.var)) is not None:  # before anything is written to its var
        print(f"make run: {already_running(a.var, suite)}; this run started nothing")
        return 1
    env = {k: v for k, v in os.environ.items() if k not in ("BIND", "PORT")}
    env.update(REDIS_URL=a.store, SWEEP_SECONDS=str(a.sweep_seconds), PYTHONUNBUFFERED="1")
    env.update({"WEB_CONCURRENCY": str(a.web_concurrency)} if a.web_concurrency else {})
    # One archive of finished games for every part (the worker's beat moves games there
    # ARCHIVE_AFTER after their end; ARCHIVE_URL overrides): with --cluster a PostgreSQL
    # server of the run's own when one is installed (deploy/local/postgres.py), else a
    # SQLite file in this run's var.
    archive: list[Stage] = []
    no_postgres = "" if not a.cluster or "ARCHIVE_URL" in env else postgres.missing()
    if a.cluster and "ARCHIVE_URL" not in env and not no_postgres:
        a.var.mkdir(parents=True, exist_ok=True)
        no_postgres = postgres.unreachable(a.var)
    if a.cluster and "ARCHIVE_URL" not in env and not no_postgres:
        try:
            stage, env["ARCHIVE_URL"] = postgres.archive_stage(a.var, free_port())
        except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
            no_postgres = f"its cluster could not be made: {exc}"
        else:
            archive.append(stage)
    env.setdefault("ARCHIVE_URL", f"sqlite:///{a.var / 'archive.sqlite3'}")
    # Development: every request logged, any browser origin, webhooks to this machine, games
    # without an API key.
    for key, value in (("ACCESS_LOG", "-"), ("CORS_ORIGINS", "*"), ("WEBHOOK_ALLOW_PRIVATE", "1"),
                       ("ANONYMOUS_GAMES", "1")):  # fmt: skip
        env.setdefault(key, value)
    say, safe = partial(print, flush=True), partial(re.sub, r":[^:@/]*@", ":***@")  # no password
    try:
        nginx, why = (None, "--no-proxy") if a.no_proxy else proxy_binary(a.nginx, say)
        check(a, nginx)
        if nginx:  # it reaches the services from this machine: its X-Forwarded-For counts
            env.setdefault("TRUSTED_PROXIES", "127.0.0.1,::1")
        store = store_stage(a)  # first: it makes the Redis users the app's parts use
        app = app_stage(a, nginx)
        stages = [store, *archive, app]
        env.update({"BROKER_URL": a.broker} if a.broker else {})  # its user's, once made
        stages += [proxy_stage(a, nginx, app)] if nginx else []
    except (RuntimeError, OSError) as exc:
        print(f"make run: {exc}")
        return 1
    if env["WEBHOOK_ALLOW_PRIVATE"].strip().lower() in ("1", "true", "yes"):
        say(WARNING)
    if env["ANONYMOUS_GAMES"].strip().lower() in ("1", "true", "yes"):
        say(ANONYMOUS)
    parts = ", ".join(p.name for s in stages for p in s.programs)
    say(f"Carcassonne Cloud under supervisord: {parts}")
    say(f"  event store {safe(a.store)}, Celery broker {safe(a.broker or a.store)}")
    if not a.redis_url:
        say(f"  Redis users {', '.join(ROLES)} (default user off); passwords in {a.users}")
    say(f"  archive of finished games {safe(env['ARCHIVE_URL'])}"
        + (f" (no PostgreSQL: {no_postgres})" if no_postgres else ""))  # fmt: skip
    say(f"  logs in {a.var}/log/<part>.log; supervisorctl -c {a.var}/supervisord.conf status")
    say(f"  CORS_ORIGINS={env['CORS_ORIGINS']}: the browser origins allowed (set it to narrow)")
    urls = served_at(a, nginx, why, say)
    done = f": {urls}. Try `make demo`; Ctrl-C stops everything."
    where = f"{urls}, event store {safe(a.store)}"
    return serve(stages, a.var, env, say, a.timeout, done, where)


if __name__ == "__main__":
    sys.exit(main())
