"""Fixtures for the `run` and `demo` tests: an explicit environment for the refresh, and helpers."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CANARY

CYCLE = "2026-H2"


@pytest.fixture
def run_env(gateway: Any, tavily: Any) -> dict[str, str]:
    """Keys and base URLs for `run`, passed explicitly (the runner never needs os.environ for them)."""
    return {
        "OPENROUTER_API_KEY": CANARY["OPENROUTER_API_KEY"],
        "TAVILY_API_KEY": CANARY["TAVILY_API_KEY"],
        "OPENROUTER_BASE_URL": gateway.base_url,
        "TAVILY_BASE_URL": tavily.base_url,
    }


class Output(list):
    """Collects echoed lines; `text` joins them."""

    @property
    def text(self) -> str:
        return "\n".join(self)


@pytest.fixture
def out() -> Output:
    return Output()


def refresh(repo: Path, env: dict[str, str], echo: Callable[[str], None], **kwargs: Any) -> Any:
    """`run` up to the route table (no synthesis or publishing: those stages are tested elsewhere)."""
    from research_dispatch.run.refresh import run_refresh

    kwargs.setdefault("synthesize", False)
    kwargs.setdefault("live", False)
    return run_refresh(repo, cycle=CYCLE, env=env, echo=echo, **kwargs)


def sessions(gateway: Any) -> set[str]:
    """Report stems the fake gateway saw research calls for."""
    return {str(c["session"]).split(":", 1)[1] for c in gateway.completions if c.get("session")}


def wait_for(predicate: Callable[[], bool], timeout: float = 60.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def cli_process(repo: Path, env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    """`research-dispatch run` in a child process (SIGINT restored to Python's default handler)."""
    child_env = {k: v for k, v in os.environ.items() if k not in ("OPENROUTER_API_KEY", "TAVILY_API_KEY")}
    child_env.update(env)
    child_env.update({"RESEARCH_DISPATCH_PROGRESS": "plain", "PYTHONUNBUFFERED": "1"})
    code = ("import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
            "from research_dispatch.cli import main; sys.argv = ['research-dispatch'] + sys.argv[1:]; main()")
    return subprocess.Popen([sys.executable, "-c", code, "run", "--repo", str(repo), "--cycle", CYCLE, *args],
                            env=child_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)


class LineReader:
    """Reads a child's output on a thread, so a test can wait for a line without blocking forever."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        self._thread = threading.Thread(target=self._pump, args=(process,), daemon=True)
        self._thread.start()

    def _pump(self, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, needle: str, timeout: float = 60.0) -> None:
        try:
            wait_for(lambda: any(needle in line for line in self.lines), timeout,
                     f"output line containing {needle!r}")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; output so far:\n" + "\n".join(self.lines)) from None

    def text(self, timeout: float = 10.0) -> str:
        self._thread.join(timeout)
        return "\n".join(self.lines)


@pytest.fixture
def children() -> Iterator[list[subprocess.Popen[str]]]:
    """Child processes a test started; any still running at teardown are killed (by their own pid)."""
    started: list[subprocess.Popen[str]] = []
    yield started
    for process in started:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)
