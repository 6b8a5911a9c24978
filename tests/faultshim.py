"""Faults at the operating-system layer, for the write-path tests: the Nth file operation under watched
directories fails like a full disk (ENOSPC), a read-only filesystem (EROFS), or kills the process.

Counted operations are the ones a durable write is made of: creating a file (`os.open` with `O_CREAT`, which
is also what `tempfile.mkstemp` does), flushing it (`os.fsync` — where a full disk reports itself), renaming
(`os.replace`) and removing (`os.unlink`). Only paths under the watched directories count, so the fake
servers, git and the traces are untouched. This patches the OS layer, not the product: the product's own
code runs as is.

In a child process: `FAULT_WATCH` (os.pathsep-separated directories), `FAULT_KIND` (enospc | erofs |
kill | count), `FAULT_AT` (1-based), `FAULT_LOG` (a file that gets one line per counted operation), optionally
`FAULT_MATCH` (only paths containing it count) and `FAULT_ONCE=1` (fail that one operation only), then
`install_from_env()` before the CLI starts (`CHILD` is such a launcher).
"""

from __future__ import annotations

import errno
import os
import signal
from pathlib import Path
from typing import Any

ERRORS = {"enospc": errno.ENOSPC, "erofs": errno.EROFS}


class Faults:
    """Count watched operations; from operation `at` on, fail (enospc/erofs: every later one too, as a
    disk stays full) or kill the process (kill)."""

    def __init__(self, watch: list[Path], kind: str, at: int = 0, log: Path | None = None, *,
                 match: str = "", once: bool = False) -> None:
        self.watch = [str(Path(w).resolve()) for w in watch]
        self.kind = kind
        self.at = at
        self.log = log
        self.match = match  # only paths containing this text count (e.g. one leg's stem)
        self.once = once  # fail only operation `at` (a transient fault), not every later one
        self.ops: list[tuple[str, str]] = []
        self._saved: dict[str, Any] = {}

    def _watched(self, path: str) -> bool:
        resolved = str(Path(path).resolve())
        if self.match and self.match not in resolved:
            return False
        return any(resolved == w or resolved.startswith(w + os.sep) for w in self.watch)

    def _hit(self, op: str, path: str) -> None:
        if not self._watched(path):
            return
        self.ops.append((op, path))
        if self.log is not None:
            with open(self.log, "a", encoding="utf-8") as handle:
                handle.write(f"{len(self.ops)} {op} {path}\n")
        if self.kind == "count" or not self.at or len(self.ops) < self.at:
            return
        if self.once and len(self.ops) > self.at:
            return
        if self.kind == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        code = ERRORS[self.kind]
        raise OSError(code, os.strerror(code), path)

    def install(self) -> Faults:
        open_, fsync, replace, unlink = os.open, os.fsync, os.replace, os.unlink
        self._saved = {"open": open_, "fsync": fsync, "replace": replace, "unlink": unlink}

        def faulty_open(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
            if flags & os.O_CREAT:
                self._hit("create", os.fspath(path))
            return open_(path, flags, *args, **kwargs)

        def faulty_fsync(fd: int) -> None:
            try:
                path = os.readlink(f"/proc/self/fd/{fd}")
            except OSError:
                path = ""
            self._hit("fsync", path)
            fsync(fd)

        def faulty_replace(src: Any, dst: Any, **kwargs: Any) -> None:
            self._hit("rename", str(dst))
            replace(src, dst, **kwargs)

        def faulty_unlink(path: Any, **kwargs: Any) -> None:
            self._hit("unlink", str(path))
            unlink(path, **kwargs)

        os.open = faulty_open  # type: ignore[assignment]
        os.fsync = faulty_fsync
        os.replace = faulty_replace
        os.unlink = faulty_unlink  # type: ignore[assignment]
        return self

    def uninstall(self) -> None:
        if self._saved:
            os.open = self._saved["open"]
            os.fsync, os.replace, os.unlink = self._saved["fsync"], self._saved["replace"], self._saved["unlink"]
            self._saved = {}

    def __enter__(self) -> Faults:
        return self.install()

    def __exit__(self, *exc: Any) -> None:
        self.uninstall()


def install_from_env() -> Faults:
    watch = [Path(p) for p in os.environ["FAULT_WATCH"].split(os.pathsep) if p]
    log = os.environ.get("FAULT_LOG")
    return Faults(watch, os.environ["FAULT_KIND"], int(os.environ.get("FAULT_AT", "0")),
                  Path(log) if log else None, match=os.environ.get("FAULT_MATCH", ""),
                  once=os.environ.get("FAULT_ONCE") == "1").install()


CHILD = ("import sys, tests.faultshim as shim; shim.install_from_env(); from research_dispatch.cli import main; "
         "sys.argv = ['research-dispatch'] + sys.argv[1:]; main()")
