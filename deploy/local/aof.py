"""Start redis-server after cutting a torn transaction off the end of its append-only file.

Redis writes the effects of one Lua script (our append: the events, the idempotency record,
the change-feed entry) to the AOF as one MULTI … EXEC block. Killed in the middle of that
write, the file can end inside the block, in the middle of a command. Redis 6.2 and 7.0 (with
their default `aof-load-truncated yes`) then cut only the partial command and leave MULTI and
the whole commands after it in the file. The next writes are appended after them, and at the
restart after that the orphaned half-block is applied together with the next transaction: an
append script half applied, events without their feed entry (Valkey fixed its loader in 2026,
valkey-io/valkey#4342; tests/integration/test_aof_repair.py shows the bug on the binaries
here). This cuts the file where that block starts, as `redis-check-aof --fix` would, and only
in that case: any other damage is left to Redis, which refuses to start on it, so an operator
decides (a cut in the middle of a file would drop acknowledged writes).

Usage: `python deploy/local/aof.py redis-server --dir D …` checks D's AOF, then runs Redis in
its place (same process, so a supervisor's signals reach Redis).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

_ANALYZED = re.compile(rb"AOF analyzed: (?:filename=(?P<name>[^,]+), )?size=(?P<size>\d+), "
                       rb"ok_up_to=(?P<ok>\d+)")  # fmt: skip
_MULTI = b"*1\r\n$5\r\nmulti\r\n"
_EXEC = b"*1\r\n$4\r\nexec\r\n"


def aof_of(directory: Path) -> Path | None:
    """The file redis-check-aof reads for the AOF in `directory`: Redis 7's manifest
    (appendonlydir/), else Redis 6's single file; None when there is none yet."""
    manifests = sorted((directory / "appendonlydir").glob("*.manifest"))
    single = directory / "appendonly.aof"
    return manifests[0] if manifests else single if single.is_file() else None


def torn_transaction(server: str, aof: Path) -> tuple[Path, int] | None:
    """(the file, the offset its torn last transaction starts at), or None when the AOF does
    not end inside a MULTI block. `server`: the redis-server binary, run as redis-check-aof
    (one binary: it picks its role from the name it is called by)."""
    checked = subprocess.run(["redis-check-aof", str(aof)], executable=server,
                             capture_output=True, timeout=600, check=False)  # fmt: skip
    # Redis 7 checks its base file, then each incremental one: the damaged one is the one
    # whose valid part ends before its end.
    damaged = [m for m in _ANALYZED.finditer(checked.stdout) if m["ok"] != m["size"]]
    if checked.returncode == 0 or not damaged:
        return None
    found = damaged[-1]
    name, ok = found["name"], int(found["ok"])
    path = aof.parent / name.decode() if name else aof
    with path.open("rb") as file:
        file.seek(ok)
        cut = file.read().lower()
    # Only a block Redis would half apply: it starts the cut and no EXEC closes it (damage
    # anywhere else, an EXEC past the cut, is not ours to drop).
    return (path, ok) if cut.startswith(_MULTI) and _EXEC not in cut else None


def repair(server: str, directory: Path) -> str:
    """Cut a torn last transaction off the AOF in `directory`; what was done, "" for nothing."""
    aof = aof_of(directory)
    torn = None if aof is None else torn_transaction(server, aof)
    if torn is None:
        return ""
    path, offset = torn
    size = path.stat().st_size
    os.truncate(path, offset)
    return f"{path}: cut {size - offset} bytes of a torn MULTI block at offset {offset}"


def main(argv: list[str]) -> None:
    """Repair the AOF of `argv`'s --dir (default: the working directory), then exec `argv`."""
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        sys.exit(0 if argv else 2)
    directory = Path(argv[argv.index("--dir") + 1]) if "--dir" in argv else Path.cwd()
    done = repair(argv[0], directory)
    if done:
        print(f"deploy/local/aof.py: {done}", file=sys.stderr, flush=True)
    os.execv(argv[0], argv)


if __name__ == "__main__":
    main(sys.argv[1:])
