"""The CLI in this interpreter: one helper for every test that checks a rule of a command.

Why in process. Most CLI tests check rules — an output line, an exit code, the files a command writes,
what reached the fake servers — for which a fresh interpreter adds a second of imports and nothing else.
They call `run_cli` here: click's `CliRunner` invokes the real `main` (the console script's function)
with the argv a user types, so option parsing, `guarded`'s exit codes and every stage run as they do in
a process, with stdout and stderr kept apart. A fresh interpreter stays where the process is the point
(signals, the repository lock between two processes, import races and weight, the real entry point's
exit codes and stderr, a kill at every write, the push race, a few end-to-end runs); those tests say so.

What a process gave for free, this helper gives explicitly, and checks the product gives back:
  * the environment: `env` is the whole environment the command sees (like `subprocess.run(env=...)`):
    every other variable is hidden for the call (CliRunner's `env=`, None for a hidden one) and
    os.environ is restored after it, so nothing leaks into a later test. Without `env` the command sees
    the test's own environment (already free of keys: tests/conftest.py `_isolated_env`);
  * the working directory (`cwd`), entered for the call and left after it;
  * a clean slate after the call: the product must be callable again in the same process, so a command
    that leaves os.environ changed, its Ctrl-C handler installed, the working directory moved or a thread
    of its own running fails the test that ran it (`_leftovers`).
"""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from click.testing import CliRunner

from research_dispatch.cli import main

PROG = "research-dispatch"
THREAD_GRACE_S = 5.0
"""How long a command's own threads may take to end after it returned (a pool's worker finishing its
last `shutdown`); longer means a thread outlives its command — a leak the next call in this process
would inherit."""


@dataclass(frozen=True)
class CliRun:
    """One finished command: its argv (after the program name), exit code, stdout, stderr, and `output`:
    both as a terminal shows them, in the order they were written (from a process's two pipes, whose
    order is lost: stdout then stderr)."""

    args: tuple[str, ...]
    code: int
    stdout: str
    stderr: str
    output: str

    def __str__(self) -> str:
        return f"$ {PROG} {' '.join(self.args)}  → exit {self.code}\n{self.output}"


@contextmanager
def _working_directory(path: Path | None) -> Iterator[None]:
    if path is None:
        yield
        return
    before = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)


def _overrides(env: Mapping[str, str] | None) -> dict[str, str | None]:
    """CliRunner's `env=` that makes os.environ exactly `env` for the call (None hides a variable)."""
    if env is None:
        return {}
    hidden: dict[str, str | None] = {name: None for name in os.environ if name not in env}
    return {**hidden, **env}


def _leftovers(environ: dict[str, str], handler: object, cwd: str, threads: set[threading.Thread]) -> list[str]:
    """What a command left behind in this process (see the module docstring), one line each."""
    found = []
    if dict(os.environ) != environ:
        changed = sorted(set(os.environ.items()) ^ set(environ.items()))
        found.append(f"os.environ changed: {sorted({name for name, _ in changed})}")
    if signal.getsignal(signal.SIGINT) is not handler:
        found.append(f"SIGINT handler left installed: {signal.getsignal(signal.SIGINT)!r}")
    if os.getcwd() != cwd:
        found.append(f"working directory moved to {os.getcwd()}")
    deadline = time.monotonic() + THREAD_GRACE_S
    for thread in set(threading.enumerate()) - threads:
        fake = _fake_server(thread)
        if fake is not None and _client_hung_up(thread):
            continue  # the fake finishes a scripted delay on its own; the command let go of the connection
        thread.join(max(0.0, deadline - time.monotonic()))
        if thread.is_alive():
            found.append(f"a connection to {fake} left open" if fake else f"thread {thread.name!r} still running")
    return found


def _fake_server(thread: threading.Thread) -> str | None:
    """The fake server (research_dispatch_fakes.http) whose request thread this is, by name; else None."""
    server = getattr(getattr(thread, "_target", None), "__self__", None)
    owner = getattr(server, "owner", None)
    return type(owner).__name__ if owner is not None else None


def _client_hung_up(thread: threading.Thread) -> bool:
    """Whether the client end of a fake's request connection is closed. A request thread that outlives the
    command while its client is still connected serves a connection the command left open — a client it did
    not close, which a process would only drop at exit."""
    connection = thread._args[0]  # type: ignore[attr-defined]  # socketserver: (request, client_address)
    try:
        return connection.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False  # open, nothing to read
    except OSError:
        return True  # reset, or already closed by the server


def run_cli(*args: str, env: Mapping[str, str] | None = None, cwd: Path | None = None,
            input: str | None = None) -> CliRun:
    """`research-dispatch ARGS` in this interpreter (the module docstring says what is kept apart)."""
    environ, handler, here = dict(os.environ), signal.getsignal(signal.SIGINT), os.getcwd()
    threads = set(threading.enumerate())
    runner = CliRunner(env=_overrides(env))
    with _working_directory(cwd):
        # catch_exceptions=False: an exception `guarded` does not turn into an exit code is a test failure
        # with its own traceback (a process would print it on stderr and exit 1)
        result = runner.invoke(main, list(args), prog_name=PROG, input=input, catch_exceptions=False)
    left = _leftovers(environ, handler, here, threads)
    assert not left, f"{PROG} {' '.join(args)} left process-global state behind: " + "; ".join(left)
    # int(): `sys.exit(ExitCode.X)` leaves the enum member, shown as the number a process would exit with
    return CliRun(tuple(args), int(result.exit_code), result.stdout, result.stderr, result.output)
