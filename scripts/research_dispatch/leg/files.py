"""A leg's files on disk: the report, its call log and its evidence file are written as ONE unit, the
status file after them.

Why a unit: the call log is the evidence for the report's route, the evidence file for its citations.
Written one after the other, a failure between them (disk full, a read-only directory, a kill) left a
new call log beside an old report — the route proof of a good report destroyed, while the status file
still said `ok`. So:

1. *stage*: the new call log, evidence file and report are written to temp files beside their targets
   and fsynced. A failure here removes the temps: every file stays the old one.
2. *commit point*: a journal, `build/pending/<stem>.json`, is published atomically. It names the temp
   files and their targets, and carries the status record to write afterwards. A failure before the
   journal is in place removes the temps: all old.
3. *apply*: the call log, the evidence file, then the report are renamed into place, the status file
   is written, the journal removed. Renames within a directory are atomic and allocate nothing.

After the commit point the unit is committed: if applying fails or the process dies, the journal stays,
and `complete_pending` finishes it (the remaining renames, then the status file). Every writing command
takes the repository lock (`core/lock.py`) through `writer_lock`, which calls it right after taking the
lock, and `verify` calls it when the lock is free (`try_complete_pending`), so any command that looks at
the reports afterwards sees both old or both new files, and a status file that agrees with them. Until
then, `pending_stems` names the legs whose unit is not yet applied.

The same journal makes other files one unit: `collect` imports a leg's files through it, and the synthesis
writes its document, claims ledger, call log and methodology table as one (`what` names such a unit in
the journal, so the command that completes it can say what it completed).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from research_dispatch.core.errors import BadInput, DispatchError, LockHeld
from research_dispatch.core.fsio import confined, stage_file, write_atomic
from research_dispatch.core.interrupt import register_cleanup, unregister_cleanup
from research_dispatch.core.lock import RepoLock, lock_path

PENDING_DIR = "pending"
JOURNAL_SCHEMA = "research-dispatch/unit@1"
_TEMP = re.compile(r"^\.(?P<name>.+)\.[A-Za-z0-9_]{6,}\.tmp$")


class UnitNotWritten(DispatchError):
    """Staging the unit failed: nothing changed, the previous report and call log are in place."""


class UnitPending(DispatchError):
    """The unit is committed (journal written) but not yet applied; the next command completes it."""


@dataclass(frozen=True)
class FileWrite:
    relpath: str  # relative to the repository
    text: str


def journal_relpath(build_dir: str, stem: str) -> str:
    return f"{build_dir}/{PENDING_DIR}/{stem}.json"


def write_unit(repo: Path, build_dir: str, stem: str, files: Sequence[FileWrite],
               status: FileWrite | None = None, *, what: str | None = None) -> None:
    """Write `files` (call log and evidence first, report last) as one unit, then `status`. See the module
    docstring. `stem` names the journal; `what` says what the unit is (default: the leg's report and call log).

    Raises `UnitNotWritten` (nothing changed) or `UnitPending` (committed; completed by the next
    command). Bad paths raise `BadInput` before anything is written.
    """
    targets = [confined(repo, f.relpath) for f in files]
    status_target = confined(repo, status.relpath) if status is not None else None
    journal = confined(repo, journal_relpath(build_dir, stem))
    staged: list[Path] = []
    try:
        for target, write in zip(targets, files, strict=True):
            staged.append(stage_file(target, write.text))
        record = {"schema": JOURNAL_SCHEMA, "stem": stem,
                  "moves": [[tmp.relative_to(repo.resolve()).as_posix(), f.relpath]
                            for tmp, f in zip(staged, files, strict=True)],
                  "status": [status.relpath, status.text] if status is not None else None,
                  "what": what or _leg_unit(stem)}
        write_atomic(journal, json.dumps(record, sort_keys=True) + "\n")
    except OSError as exc:
        for tmp in staged:
            with contextlib.suppress(OSError):
                tmp.unlink()
        raise UnitNotWritten(f"could not write {', '.join(f.relpath for f in files)}: {_os_error(exc)}; "
                             "the previous files are unchanged") from None
    try:
        for tmp, target in zip(staged, targets, strict=True):
            os.replace(tmp, target)
        if status is not None and status_target is not None:
            write_atomic(status_target, status.text)
        journal.unlink()
    except OSError as exc:
        raise UnitPending(f"{', '.join(f.relpath for f in files)}: written but not yet in place "
                          f"({_os_error(exc)}); the next research-dispatch command completes it") from None


def _leg_unit(stem: str) -> str:
    return f"{stem}'s report and call log"


def _os_error(exc: OSError) -> str:
    return f"{exc.strerror or type(exc).__name__}" + (f" (errno {exc.errno})" if exc.errno else "")


def pending_stems(repo: Path, build_dir: str) -> list[str]:
    directory = repo / build_dir / PENDING_DIR
    if not directory.is_dir():
        return []
    return sorted(p.name[: -len(".json")] for p in directory.glob("*.json") if p.is_file())


def complete_pending(repo: Path, build_dir: str) -> tuple[list[str], list[str]]:
    """Finish every committed unit (roll forward). Returns (what was completed, problems): each completed
    unit as its journal names it (`write_unit`'s `what`).

    Call only while holding the repository lock (or when no other writer can run). A journal that is
    not ours or names paths that are not a temp file beside its target is reported and left alone.
    """
    completed: list[str] = []
    problems: list[str] = []
    for stem in pending_stems(repo, build_dir):
        journal = repo / journal_relpath(build_dir, stem)
        try:
            moves, status, what = _read_journal(repo, journal)
        except (OSError, ValueError, BadInput) as exc:
            problems.append(f"{journal.relative_to(repo).as_posix()}: not a unit journal ({exc}); left alone")
            continue
        try:
            for tmp, target in moves:
                if tmp.exists():
                    os.replace(tmp, target)
            if status is not None:
                write_atomic(status[0], status[1])
            journal.unlink()
        except OSError as exc:
            problems.append(f"{what}: could not complete the pending write ({_os_error(exc)}); it is retried by "
                            "the next command")
            continue
        completed.append(what)
    return completed, problems


def _read_journal(repo: Path, journal: Path) -> tuple[list[tuple[Path, Path]], tuple[Path, str] | None, str]:
    data = json.loads(journal.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or data.get("schema") != JOURNAL_SCHEMA:
        raise ValueError("unknown schema")
    moves: list[tuple[Path, Path]] = []
    for tmp_rel, target_rel in data.get("moves") or []:
        tmp, target = confined(repo, str(tmp_rel)), confined(repo, str(target_rel))
        match = _TEMP.match(tmp.name)
        if tmp.parent != target.parent or match is None or match["name"] != target.name:
            raise ValueError(f"{tmp_rel} is not a temp file of {target_rel}")
        moves.append((tmp, target))
    status = data.get("status")
    status_pair = (confined(repo, str(status[0])), str(status[1])) if status else None
    what = data.get("what")
    return moves, status_pair, str(what) if isinstance(what, str) and what else _leg_unit(journal.stem)


@contextlib.contextmanager
def writer_lock(repo: Path, build_dir: str, command: str, *,
                warn: Callable[[str], None] | None = None) -> Iterator[RepoLock]:
    """Hold the repository lock for one writing command, and complete any unit a killed writer left
    committed but not applied (`complete_pending`) before the command looks at the reports.

    While it is held, the Ctrl-C backstop (`interrupt.py`) releases it if it must end the process
    without unwinding (a call that cannot be cancelled), so no command leaves its lock behind."""
    lock = RepoLock(lock_path(repo, build_dir), repo_display=str(repo), warn=warn, command=command)
    with lock:
        outermost = not lock._nested
        if outermost:
            register_cleanup(lock.release)
            completed, problems = complete_pending(repo, build_dir)
            say = warn or (lambda _message: None)
            for what in completed:
                say(f"completed the interrupted write of {what}")
            for problem in problems:
                say(problem)
        try:
            yield lock
        finally:
            if outermost:
                unregister_cleanup(lock.release)


def try_complete_pending(repo: Path, build_dir: str) -> list[str]:
    """For readers (`verify`): complete pending units when no writer holds the lock; never waits or
    fails. Returns what it completed (or could not)."""
    if not pending_stems(repo, build_dir):
        return []
    lock = RepoLock(lock_path(repo, build_dir), repo_display=str(repo), command="verify")
    try:
        lock.acquire()
    except (LockHeld, OSError):
        return []
    try:
        completed, problems = complete_pending(repo, build_dir)
    finally:
        lock.release()
    return [f"completed the interrupted write of {what}" for what in completed] + problems
