"""nginx for a local run and the tests: the templates of deploy/nginx/ filled in, and the command
that runs it in the foreground with every file it writes under one prefix directory."""

from __future__ import annotations

import os
import re
import resource
from collections.abc import Mapping, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NGINX_TEMPLATES = ROOT / "deploy" / "nginx"
PLACEHOLDER = re.compile(r"\$\{(CC_[A-Z0-9_]+)\}")
# The per-client limits at the proxy (public.conf.template; deploy/README.md): the values of
# docker-compose.yml and deploy/k8s/proxy.yaml too, unless a caller gives its own.
LIMITS = {"CC_LIVE_PER_CLIENT": "100", "CC_COSTLY_RATE": "10r/s", "CC_COSTLY_BURST": "50",
          "CC_COSTLY_TOTAL_RATE": "20r/s", "CC_COSTLY_TOTAL_BURST": "60"}  # fmt: skip


def nginx_limits(wanted: int = 65536) -> tuple[int, int]:
    """(worker_rlimit_nofile, worker_connections) within this process's hard open-file limit,
    which an unprivileged nginx cannot raise."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    nofile = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    return nofile, max(512, min(16384, nofile - 256))  # a margin for log and temporary files


def nginx_servers(addresses: Sequence[str]) -> str:
    """An upstream's `server` lines for its instances' host:port (CC_COMMAND_SERVERS …). One
    that refuses connections is skipped for 5 s (a single server never is)."""
    if not addresses:
        raise ValueError("an upstream needs at least one server")
    return "\n    ".join(f"server {a} max_fails=1 fail_timeout=5s;" for a in addresses)


def render_nginx(out: Path, values: Mapping[str, str], sites: Sequence[str]) -> Path:
    """Fill the templates into `out` (the sites named, no others); the main file's path. Every
    placeholder needs a value (the error names those missing); the limits default to
    `LIMITS`."""
    values = {**LIMITS, **values}
    for template in sorted(NGINX_TEMPLATES.rglob("*.template")):
        relative = template.relative_to(NGINX_TEMPLATES).with_suffix("")  # x.conf.template
        target = out / relative
        if relative.parent.name == "sites" and relative.stem not in sites:
            target.unlink(missing_ok=True)
            continue
        text = template.read_text()
        missing = sorted(set(PLACEHOLDER.findall(text)) - set(values))
        if missing:
            raise ValueError(f"{template}: no value for {', '.join(missing)}")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(PLACEHOLDER.sub(lambda m: values[m.group(1)], text))
    return out / "nginx.conf"


def nginx_argv(binary: str, prefix: Path, conf: Path, error_log: str = "stderr") -> list[str]:
    """nginx in the foreground, its files under `prefix`, its error log from the first line on
    (never /var/log/nginx). As root its workers stay root: `nobody` may not reach `prefix`."""
    directives = "daemon off;" + (" user root;" if os.geteuid() == 0 else "")
    return [binary, "-p", f"{prefix}/", "-c", str(conf), "-e", error_log, "-g", directives]
