"""SIGTERM is handled as Ctrl-C (issue 31, What to build 6).

SIGTERM is how everything but a terminal asks a process to stop: `docker stop`, systemd, `timeout`, a
Kubernetes or CI runner cancelling a job. Before, the default action killed a leg in 0.08 s with no status
file — its paid calls in no record — and left the repository lock behind. Each case starts the installed
CLI in a fresh process (the process is the point), blocks one of its model calls at the fake gateway for
40 s, and stops it as those tools do: the process is gone within the Ctrl-C bound, exit non-zero with one
plain line and no traceback, the leg's status file says interrupted with the calls and dollars spent so
far, no lock and no temp file is left.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from research_dispatch.core.lock import LOCK_NAME
from tests.bounds.conftest import Child, child_env, command, fake_env, figure, make_repo

pytestmark = pytest.mark.slow

reliability = pytest.mark.reliability
BLOCK_S = 40
STOP_WITHIN_S = 8.0


def _wait(predicate: Any, what: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def _status(repo: Path, stem: str) -> dict[str, Any]:
    return json.loads((repo / "build" / "legs" / f"{stem}.json").read_text(encoding="utf-8"))


def _no_leftovers(repo: Path) -> None:
    assert not (repo / "build" / LOCK_NAME).exists(), "the repository lock was left behind"
    assert [p.relative_to(repo).as_posix() for p in repo.rglob("*.tmp")] == []


@reliability(area="bounds", case="SIGTERM (docker stop, systemd) during `research` while it waits 40 s on a model "
                                 "call",
             expect="handled as Ctrl-C: exit 1 within 8 s with one line 'error: interrupted by SIGTERM …', no "
                    "traceback; the status file says interrupted with the paid first call and its cost; no report, "
                    "no lock, no temp file")
def test_sigterm_during_research_records_the_leg_and_releases_the_lock(tmp_path: Path, gateway: Any, tavily: Any,
                                                                       children: list[Child]) -> None:
    repo = make_repo(tmp_path, ("02-",))
    gateway.set_scenario({"rules": [{"match": {"session": "*02-diloco-family"}, "on_call": 2, "delay_s": BLOCK_S}]})
    child = Child(command("research", "diloco-family", "--repo", str(repo)), child_env(fake_env(gateway, tavily)))
    children.append(child)
    _wait(lambda: len(gateway.completions) >= 2, "the second model call")
    time.sleep(0.5)
    child.process.send_signal(signal.SIGTERM)
    sent = time.monotonic()
    done = child.finish(timeout=BLOCK_S + 30)
    stop_s = child.started + done.seconds - sent
    figure("SIGTERM: research, model call blocked", stop_s=stop_s, peak_rss_mb=done.peak_rss_mb)
    assert done.code == 1, done.output
    assert stop_s < STOP_WITHIN_S, done.output
    assert "Traceback" not in done.output
    errors = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and errors[0].startswith("error: interrupted by SIGTERM"), errors
    status = _status(repo, "02-diloco-family")
    assert status["status"] == "failed" and status["interrupted"] is True and "SIGTERM" in status["error"]
    assert status["calls"] == 1 and status["cost_usd"] > 0  # the paid first call is on record
    assert not (repo / "research" / "02-diloco-family.md").exists()
    _no_leftovers(repo)


@reliability(area="bounds", case="`timeout 15 research-dispatch run` while a leg waits 40 s on a model call",
             expect="`timeout`'s SIGTERM is handled as Ctrl-C: the run stops within 8 s of it (timeout's exit 124), "
                    "the blocked leg's status says interrupted by SIGTERM with its spend so far, the queued leg never "
                    "starts, the lock is released, no report or temp file")
def test_timeout_stops_run_as_ctrl_c_does(tmp_path: Path, gateway: Any, tavily: Any, children: list[Child]) -> None:
    repo = make_repo(tmp_path, ("02-", "04-"))
    gateway.set_scenario({"rules": [{"match": {"session": "*02-diloco-family"}, "on_call": 2, "delay_s": BLOCK_S}]})
    limit = 15  # long enough to reach the blocked call on a loaded machine, far shorter than the block
    child = Child(["timeout", str(limit), *command("run", "--repo", str(repo), "--jobs", "1", "--no-publish")],
                  child_env(fake_env(gateway, tavily)))
    children.append(child)
    done = child.finish(timeout=BLOCK_S + 60)
    figure("SIGTERM: timeout run", wall_s=done.seconds)
    assert done.code == 124, done.output  # timeout's own code: it had to stop the command
    assert done.seconds < limit + STOP_WITHIN_S, done.output
    assert "Traceback" not in done.output
    assert "run interrupted" in done.stdout and "the lock is released" in done.stdout, done.output
    status = _status(repo, "02-diloco-family")
    assert status["status"] == "failed" and status["interrupted"] is True and "SIGTERM" in status["error"]
    assert status["calls"] >= 1 and status["cost_usd"] > 0
    assert len(gateway.completions) >= 2  # it was stopped while blocked in its second call, not before
    assert not (repo / "build" / "legs" / "04-verl-trl.json").exists()  # never started
    assert not (repo / "research").exists() or not any((repo / "research").glob("*.md"))
    _no_leftovers(repo)
