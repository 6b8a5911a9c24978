"""The in-process CLI helper (tests/clirun.py) keeps what a process kept apart: the environment, the working
directory, stdout and stderr — and fails a command that leaves process-global state behind."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import pytest

from tests.clirun import _leftovers, run_cli


def test_env_is_the_whole_environment_of_the_call_and_is_restored(repo: Path, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    outside, inside = tmp_path / "outside", tmp_path / "inside"
    monkeypatch.setenv("GITHUB_OUTPUT", str(outside))
    before = dict(os.environ)
    done = run_cli("plan", "--repo", str(repo), "--github-output", env={"GITHUB_OUTPUT": str(inside)})
    assert done.code == 0 and "cycle<<" in inside.read_text(encoding="utf-8") and not outside.exists(), done
    hidden = run_cli("plan", "--repo", str(repo), "--github-output", env={})  # not even the test's own variable
    assert hidden.code == 2 and "GITHUB_OUTPUT" in hidden.stderr and not outside.exists(), hidden
    assert dict(os.environ) == before


def test_without_env_the_command_sees_the_tests_environment(repo: Path, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out"
    monkeypatch.setenv("GITHUB_OUTPUT", str(out))
    done = run_cli("plan", "--repo", str(repo), "--github-output", "--cycle", "2027-H1")
    assert done.code == 0 and done.stderr == "", done
    assert "cycle<<" in out.read_text(encoding="utf-8")


def test_cwd_is_entered_for_the_call_and_left_after(repo: Path) -> None:
    here = os.getcwd()
    done = run_cli("check", cwd=repo / "topics")  # finds the repository above the working directory
    assert done.code == 0 and done.stdout.startswith("ok: 5 topic(s), 5 leg(s)"), done
    assert os.getcwd() == here


def test_usage_errors_keep_the_programs_name_and_stderr_apart() -> None:
    done = run_cli("plan", "--frobnicate")
    assert done.code == 2 and done.stdout == ""
    assert done.stderr.startswith("Usage: research-dispatch plan [OPTIONS]"), done.stderr


def test_what_a_command_leaves_behind_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    environ, handler, cwd = dict(os.environ), signal.getsignal(signal.SIGINT), os.getcwd()
    threads = set(threading.enumerate())
    assert _leftovers(environ, handler, cwd, threads) == []
    release = threading.Event()
    stray = threading.Thread(target=release.wait, name="stray", daemon=True)
    monkeypatch.setenv("RD_TEST_LEFT", "1")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("tests.clirun.THREAD_GRACE_S", 0.0)
    previous = signal.signal(signal.SIGINT, lambda *_: None)
    stray.start()
    try:
        left = _leftovers(environ, handler, cwd, threads)
    finally:
        signal.signal(signal.SIGINT, previous)
        release.set()
        stray.join()
    assert left[0] == "os.environ changed: ['RD_TEST_LEFT']" and left[1].startswith("SIGINT handler left installed")
    assert left[2:] == [f"working directory moved to {tmp_path.resolve()}", "thread 'stray' still running"]
