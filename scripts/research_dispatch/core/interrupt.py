"""Ctrl-C — and SIGTERM — ends every command within seconds, whatever is blocked.

SIGTERM is how everything but a terminal asks a process to stop: `docker stop`, systemd, `timeout`, a
Kubernetes or CI runner cancelling a job. Left at its default it killed a leg in a fraction of a second
with no status file (its paid calls in no record) and the repository lock left behind. So it is handled
exactly as Ctrl-C: the same path below, the same status files (with the spend so far), the lock released,
exit 1; only the words say which signal it was (`reason()`).

SIGINT raises `KeyboardInterrupt` in the main thread, as Python does by default, and each command's
own interrupt path runs: `run` stops new legs, gives running legs a short grace period, records the
legs that are still blocked as interrupted and releases the lock; `research` records its leg as
interrupted. A socket read in the main thread is interrupted by the signal itself.

Two things cannot be interrupted from outside: a *worker* thread blocked in a socket read (the server
sends nothing; only the call's own deadline ends it), and a thread pool that joins such a worker on
the way out (`ThreadPoolExecutor.__exit__`, and again at interpreter exit). So the first Ctrl-C also
arms a backstop: if the process is still alive `HARD_EXIT_AFTER_S` later, it runs the registered
cleanups (the repository lock registers its release), says so on stderr and ends the process with
exit 1 without joining anything. Files are never half-written by this: every write is atomic
(`fsio.write_atomic`), and the next run sweeps the temp files an abandoned writer leaves.

`guarded` (cli.py) installs the handler for the duration of each command; `shielded()` lets an
interrupt path finish its bookkeeping without a second Ctrl-C (or SIGTERM) cutting it short.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from types import FrameType

from research_dispatch.core.errors import ExitCode

HARD_EXIT_AFTER_S = 5.0
"""From the first Ctrl-C to the backstop's exit. Longer than `run`'s grace for blocked legs
(`run/pool.LEG_STOP_GRACE_S`) plus its bookkeeping, so the orderly path normally finishes first."""

SIGNALS = (signal.SIGINT, signal.SIGTERM)
"""The signals that interrupt a command (each one handled as Ctrl-C)."""
_CAUSES = {signal.SIGINT: "the user (Ctrl-C)", signal.SIGTERM: "SIGTERM (a request to stop: docker stop, "
                                                                "systemd, timeout, a cancelled job)"}

_tripped = threading.Event()
_cause = signal.SIGINT
_lock = threading.Lock()
_cleanups: list[Callable[[], None]] = []
_backstop: threading.Thread | None = None
_shield_depth = 0


def interrupted() -> bool:
    """Has this process received Ctrl-C (SIGINT) or SIGTERM since it started?"""
    return _tripped.is_set()


def reason() -> str:
    """What interrupted the command, for its status files and its last line: "interrupted by the user
    (Ctrl-C)", or by SIGTERM."""
    return f"interrupted by {_CAUSES.get(_cause, 'a signal')}"


def register_cleanup(callback: Callable[[], None]) -> None:
    """Run `callback` if the backstop has to end the process (e.g. release a lock)."""
    with _lock:
        _cleanups.append(callback)


def unregister_cleanup(callback: Callable[[], None]) -> None:
    with _lock, contextlib.suppress(ValueError):
        _cleanups.remove(callback)


def trip(after_s: float = HARD_EXIT_AFTER_S) -> None:
    """Record the interrupt; the first one arms the backstop."""
    global _backstop
    _tripped.set()
    with _lock:
        if _backstop is not None:
            return
        _backstop = threading.Thread(target=_backstop_main, args=(after_s,), name="interrupt-backstop",
                                     daemon=True)
        _backstop.start()


def _backstop_main(after_s: float) -> None:
    time.sleep(after_s)
    with _lock:
        callbacks = list(reversed(_cleanups))
    for callback in callbacks:
        with contextlib.suppress(Exception):
            callback()
    with contextlib.suppress(Exception):
        sys.stdout.flush()
    with contextlib.suppress(Exception):
        sys.stderr.write(f"error: {reason()}; a call still blocked {after_s:g} s after it was abandoned "
                         "(nothing half-written: every write is atomic)\n")
        sys.stderr.flush()
    os._exit(int(ExitCode.FAILED))


def _raising_handler(signum: int, frame: FrameType | None) -> None:
    global _cause
    if not _tripped.is_set():
        _cause = signal.Signals(signum)
    trip()
    if _shield_depth:
        return
    raise KeyboardInterrupt


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def handling_interrupts() -> Iterator[None]:
    """Install the Ctrl-C handler for SIGINT and SIGTERM (main thread only) for the block; restore the
    previous ones after.

    A process started with a signal ignored (`nohup` ignores SIGHUP, a shell's background job SIGINT)
    keeps ignoring it."""
    if not _in_main_thread():
        yield
        return
    previous = {signum: signal.getsignal(signum) for signum in SIGNALS}
    for signum, handler in previous.items():
        if handler is not signal.SIG_IGN:
            signal.signal(signum, _raising_handler)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


@contextlib.contextmanager
def shielded() -> Iterator[None]:
    """Within the block a further Ctrl-C is recorded (and arms the backstop) but raises nothing, so an
    interrupt path can write its status files and release its lock in one piece."""
    global _shield_depth
    if not _in_main_thread():
        yield
        return
    previous = {signum: signal.getsignal(signum) for signum in SIGNALS}
    for signum, handler in previous.items():
        if handler is not signal.SIG_IGN:
            signal.signal(signum, _raising_handler)
    _shield_depth += 1
    try:
        yield
    finally:
        _shield_depth -= 1
        for signum, handler in previous.items():
            signal.signal(signum, handler)
