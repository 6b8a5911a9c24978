"""The repository lock: one writer at a time per repository.

Every command that writes — `research`, `synthesize`, `publish`, `run`, `collect` — takes it through
`leg/files.writer_lock` (which also completes a unit a killed writer left half-applied): two writers on
the same checkout would interleave report writes, race on the synthesis and fight over the refresh
branch (a `publish` beside a running `run` committed half a refresh). A second writer is refused with
one line naming the holder's command, pid and start time.

The lock is re-entrant within one process: `run` holds it for the whole refresh, and the stages it
calls (`publish`, the synthesis) take it again without deadlocking on their own lock.

The lock itself is the operating system's, through `filelock` (flock on POSIX, LockFileEx on Windows)
on `build/.research-dispatch.lock.guard`: the kernel lets it go when its process ends, however it
ends, so a writer killed with SIGKILL never blocks the next one. Beside it the holder keeps a note,
`build/.research-dispatch.lock` (pid, host, start time, command and a random token), which a refused
writer names in its one line, and which is removed on release only if it still holds our token.

A note found by a writer that got the kernel lock was left by a holder that is gone, or that never took
the kernel lock (a release before filelock, which locked by the note alone). It is *stale* when its
holder certainly no longer runs — same host, and the pid no longer runs or now belongs to a younger
process (pid reuse, common in containers) — and is then replaced with a warning. A note from another
host is never judged stale: we cannot see its processes (a build directory on a shared disk, where a
kernel lock may not reach), so it refuses the writer as a live holder does.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import secrets
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import filelock

from research_dispatch.core.errors import LockHeld
from research_dispatch.core.fsio import confined, write_atomic

LOCK_NAME = ".research-dispatch.lock"
_HELD_TOKENS: set[str] = set()  # tokens held by this process (a lock with our pid but not ours is stale)
_HELD_PATHS: dict[Path, list[LockInfo]] = {}  # lock files this process holds, for re-entry (a stack per path)


@dataclass(frozen=True)
class LockInfo:
    """What a lock file says about its holder."""

    pid: int | None
    host: str
    started_at: str
    token: str
    proc_start: str | None = None
    command: str = ""

    @classmethod
    def parse(cls, text: str) -> LockInfo | None:
        try:
            data = json.loads(text)
            return cls(pid=int(data["pid"]), host=str(data.get("host", "")), started_at=str(data.get("started_at", "")),
                       token=str(data.get("token", "")), proc_start=data.get("proc_start"),
                       command=str(data.get("command") or ""))
        except (ValueError, KeyError, TypeError):
            return None

    def to_json(self) -> str:
        return json.dumps({"pid": self.pid, "host": self.host, "started_at": self.started_at, "token": self.token,
                           "proc_start": self.proc_start, "command": self.command}, sort_keys=True) + "\n"


def _proc_start(pid: int) -> str | None:
    """The kernel's start time of a process (Linux), to tell a live holder from a reused pid."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()
    return fields[19] if len(fields) > 19 else None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    return True


def is_stale(info: LockInfo | None, *, host: str | None = None) -> bool:
    """True when the holder certainly no longer runs. Unknown or foreign holders are never stale."""
    if info is None or info.pid is None:
        return False
    if info.host != (host or socket.gethostname()):
        return False
    if info.pid == os.getpid():
        return info.token not in _HELD_TOKENS
    if not _pid_alive(info.pid):
        return True
    current = _proc_start(info.pid)
    return bool(info.proc_start and current and current != info.proc_start)


class RepoLock:
    """`with RepoLock(path): ...` — refuse a second refresh; replace a stale lock with a warning."""

    def __init__(self, path: Path, *, repo_display: str = ".", warn: Callable[[str], None] | None = None,
                 command: str = "") -> None:
        self.path = path
        self.repo_display = repo_display
        self.warn = warn or (lambda _message: None)
        self.command = command
        self.info: LockInfo | None = None
        self._nested = False
        self._kernel: filelock.BaseFileLock | None = None

    def acquire(self) -> LockInfo:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        key = self.path.resolve()
        held = _HELD_PATHS.get(key)
        if held and LockInfo.parse(self._read() or "") == held[0]:
            self.info, self._nested = held[0], True  # re-entry: `run` calls stages that lock too
            held.append(held[0])
            return held[0]
        kernel = filelock.FileLock(self.path.with_name(self.path.name + ".guard"), thread_local=False)
        try:
            kernel.acquire(timeout=0)
        except filelock.Timeout:
            raise self._held(LockInfo.parse(self._read() or "")) from None
        try:
            info = self._take_note()
        except BaseException:
            kernel.release()
            raise
        _HELD_TOKENS.add(info.token)
        _HELD_PATHS[key] = [info]
        self.info, self._kernel = info, kernel
        return info

    def _take_note(self) -> LockInfo:
        """Under the kernel lock: refuse a note of a holder that may still run, replace a stale one, write ours."""
        holder_text = self._read()
        if holder_text is not None:
            holder = LockInfo.parse(holder_text)
            if not is_stale(holder):
                raise self._held(holder)
            assert holder is not None
            self.warn(f"replacing a stale lock left by pid {holder.pid} (started {holder.started_at}), "
                      f"which is no longer running: {self.path}")
        pid = os.getpid()
        info = LockInfo(pid=pid, host=socket.gethostname(),
                        started_at=dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat()
                        .replace("+00:00", "Z"),
                        token=secrets.token_hex(8), proc_start=_proc_start(pid), command=self.command)
        write_atomic(self.path, info.to_json())
        return info

    def release(self) -> None:
        if self.info is None:
            return
        key = self.path.resolve()
        if self._nested:
            held = _HELD_PATHS.get(key)
            if held and len(held) > 1:
                held.pop()
            self.info, self._nested = None, False
            return
        _HELD_PATHS.pop(key, None)
        current = LockInfo.parse(self._read() or "")
        if current is not None and current.token == self.info.token:  # never someone else's note
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
        _HELD_TOKENS.discard(self.info.token)
        self.info = None
        if self._kernel is not None:
            self._kernel.release()
            self._kernel = None

    def __enter__(self) -> RepoLock:
        self.acquire()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()

    # ------------------------------------------------------------------------------------------
    def _read(self) -> str | None:
        try:
            return self.path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return None

    def _held(self, holder: LockInfo | None) -> LockHeld:
        who = (f"pid {holder.pid} on {holder.host} since {holder.started_at}" if holder and holder.host
               != socket.gethostname() else f"pid {holder.pid} since {holder.started_at}" if holder
               else "holder unknown")
        if holder is not None and holder.command:
            who = f"`{holder.command}`, {who}"
        return LockHeld(f"another refresh is running in {self.repo_display} ({who}); wait or remove "
                        f"{self.path} if it is stale")


def lock_path(repo: Path, build_dir: str) -> Path:
    """The repository's lock file (`<build_dir>/.research-dispatch.lock`), confined to the repository."""
    return confined(repo, build_dir) / LOCK_NAME
