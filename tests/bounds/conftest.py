"""Helpers for the bounds suite (issue 11), and the installed CLI in a fresh interpreter.

The CLI's rules (exit codes, one error line, files written) are checked in process (tests/clirun.py
`run_cli`), with the environments built here (`child_env`, `fake_env`) passed explicitly. A fresh
interpreter (`Child`, `run_process`: the installed console script, real sockets to the offline fakes on
127.0.0.1) is for the faults that do not exist inside one warm test interpreter: concurrent first
imports, a signal during a blocked socket read, an exit that joins a stuck thread, the peak memory of one
command. Each child's peak memory is its own VmHWM (tests/memory.py), and the time from signal to exit
is measured around the real process; the figures are printed (`pytest -s`) for the issue's closing
note. Bounds asserted on time are the issue's own (8 s to stop after Ctrl-C), with the product's design
stopping in about half of that.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CANARY, ROOT
from tests.memory import peak_rss_mb

CYCLE = "2026-H2"
CONSOLE = Path(sys.executable).parent / "research-dispatch"
_KEYS = ("OPENROUTER_API_KEY", "TAVILY_API_KEY", "GITHUB_TOKEN", "OPENAI_API_KEY", "EXA_API_KEY")


def command(*args: str) -> list[str]:
    """The installed console script (as a user runs it), or `python -m` if it is not installed."""
    if CONSOLE.exists():
        return [str(CONSOLE), *args]
    return [sys.executable, "-m", "research_dispatch", *args]  # pragma: no cover


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This environment without any key, plus `extra`; progress lines are plain and unbuffered."""
    env = {k: v for k, v in os.environ.items() if k not in _KEYS}
    env.update({"RESEARCH_DISPATCH_PROGRESS": "plain", "PYTHONUNBUFFERED": "1", "NO_PROXY": "127.0.0.1,localhost",
                "RESEARCH_DISPATCH_CYCLE": CYCLE})
    env.update(extra or {})
    return env


def fake_env(gateway: Any, tavily: Any) -> dict[str, str]:
    return {"OPENROUTER_API_KEY": CANARY["OPENROUTER_API_KEY"], "TAVILY_API_KEY": CANARY["TAVILY_API_KEY"],
            "OPENROUTER_BASE_URL": gateway.base_url, "TAVILY_BASE_URL": tavily.base_url}


def _default_sigint() -> None:
    """In the child, before exec: SIGINT at its default, as a terminal gives it (a test runner's worker
    may ignore it, and an ignored SIGINT is inherited — and respected by the product, like `nohup`)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@dataclass
class Finished:
    """A child process that ended: exit code, output, wall time and peak resident memory."""

    code: int
    stdout: str
    stderr: str
    seconds: float
    peak_rss_mb: float

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


class Child:
    """A CLI child process with its output pumped on threads (so a test can wait for a line)."""

    def __init__(self, args: list[str], env: dict[str, str], cwd: Path | None = None) -> None:
        self.started = time.monotonic()
        self.process = subprocess.Popen(args, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        text=True, preexec_fn=_default_sigint, start_new_session=True)
        self.out: list[str] = []
        self.err: list[str] = []
        self._pumps = [threading.Thread(target=self._pump, args=(self.process.stdout, self.out), daemon=True),
                       threading.Thread(target=self._pump, args=(self.process.stderr, self.err), daemon=True)]
        for pump in self._pumps:
            pump.start()

    @staticmethod
    def _pump(stream: Any, lines: list[str]) -> None:
        for line in stream:
            lines.append(line.rstrip("\n"))

    def wait_for_line(self, needle: str, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while not any(needle in line for line in self.out + self.err):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"no line containing {needle!r}; output so far:\n" +
                                     "\n".join(self.out + self.err))
            time.sleep(0.02)

    def interrupt(self) -> float:
        """Send SIGINT (as Ctrl-C does); returns the moment it was sent."""
        self.process.send_signal(signal.SIGINT)
        return time.monotonic()

    def finish(self, timeout: float = 300.0) -> Finished:
        """Wait for the exit; the child's peak resident memory is its `VmHWM`, read while it runs (its
        `ru_maxrss` would include this test worker's memory: see tests/memory.py)."""
        deadline = time.monotonic() + timeout
        peak = 0.0
        while True:
            peak = max(peak, peak_rss_mb(self.process.pid) or 0.0)
            pid, status = os.waitpid(self.process.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                self.kill()
                raise AssertionError(f"still running after {timeout} s; output:\n" + "\n".join(self.out + self.err))
            time.sleep(0.02)
        ended = time.monotonic()
        code = os.waitstatus_to_exitcode(status)
        self.process.returncode = code
        for pump in self._pumps:
            pump.join(10)
        return Finished(code, "\n".join(self.out), "\n".join(self.err), ended - self.started, peak)

    def kill(self) -> None:
        if self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self.process.pid, 0)
            self.process.returncode = -9


def one_error(stderr: str, *fragments: str) -> str:
    """The contract of exit 2 (and of a refused run): exactly one line on stderr, no traceback, naming
    every fragment (the file or variable, and the field). Warnings (`warning: …` lines, such as a slug the
    price list does not know) may stand beside it: they are not the refusal."""
    lines = [line for line in stderr.splitlines() if line.strip() and not line.startswith("warning: ")]
    assert len(lines) == 1, lines
    assert "Traceback" not in stderr and "internal error" not in stderr
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


def run_process(*args: str, env: dict[str, str], cwd: Path | None = None, timeout: float = 300.0) -> Finished:
    """The installed console script in a fresh interpreter, to its exit."""
    return Child(command(*args), env, cwd).finish(timeout)


@pytest.fixture
def children() -> Iterator[list[Child]]:
    """Children a test started; any still running at teardown are killed (by their own process group)."""
    started: list[Child] = []
    yield started
    for child in started:
        child.kill()


def make_repo(parent: Path, topics: tuple[str, ...] | None = None, extra_config: str = "") -> Path:
    """A repository with this project's topics (or some of them by file-name prefix) and zero back-off."""
    repo = parent / "repo"
    (repo / "topics").mkdir(parents=True)
    for path in sorted((ROOT / "topics").glob("*.yaml")):
        if topics is None or any(path.name.startswith(prefix) for prefix in topics):
            shutil.copy(path, repo / "topics" / path.name)
    (repo / "pyproject.toml").write_text(
        '[tool.research-dispatch]\nframework_name = "composer-replication-framework"\n'
        "gateway = {backoff_base_s = 0.0, backoff_max_s = 0.0}\n"
        "search_service = {backoff_base_s = 0.0, backoff_max_s = 0.0}\n" + extra_config, encoding="utf-8")
    return repo


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=Test Human", "-c",
                           "user.email=human@example.invalid", *args],
                          capture_output=True, text=True, check=True).stdout


def figure(name: str, **values: object) -> None:
    """Print one measured figure (collected for the issue's closing note with `pytest -s`)."""
    shown = ", ".join(f"{k}={v:.2f}" if isinstance(v, float) else f"{k}={v}" for k, v in values.items())
    print(f"\nFIGURE {name}: {shown}")
