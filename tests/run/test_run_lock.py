"""The repository lock, Ctrl-C, and a refresh killed mid-run."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from research_dispatch.core.errors import LockHeld
from research_dispatch.core.lock import LOCK_NAME, LockInfo, RepoLock, is_stale
from tests.clirun import run_cli
from tests.conftest import write_topic
from tests.run.conftest import CYCLE, LineReader, Output, cli_process, refresh, sessions, wait_for


def dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


HOLDER = """
import sys
from pathlib import Path
from research_dispatch.core.lock import RepoLock
from tests.clirun import run_cli
lock = RepoLock(Path(sys.argv[1]), command=sys.argv[2])
info = lock.acquire()
print(info.pid, info.started_at, flush=True)
sys.stdin.read()
lock.release()
"""


def hold_lock(path: Path, command: str, children: list) -> tuple[subprocess.Popen[str], str, str]:
    """Another process holds the repository lock (as another writing command would) until its stdin closes."""
    process = subprocess.Popen([sys.executable, "-c", HOLDER, str(path), command], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True, start_new_session=True)
    children.append(process)
    assert process.stdout is not None
    pid, started = process.stdout.readline().split()
    return process, pid, started


def release(process: subprocess.Popen[str]) -> None:
    assert process.stdin is not None
    process.stdin.close()
    assert process.wait(30) == 0


def test_a_second_run_is_refused_while_the_lock_is_held(repo: Path, run_env: dict, gateway: Any, out: Output,
                                                        children: list) -> None:
    lock_path = repo / "build" / LOCK_NAME
    lock_path.parent.mkdir(parents=True)
    holder, pid, started = hold_lock(lock_path, "publish", children)
    with pytest.raises(LockHeld) as caught:
        refresh(repo, run_env, out.append)
    message = str(caught.value)
    assert message == (f"another refresh is running in {repo} (`publish`, pid {pid} since {started}); "
                       f"wait or remove {lock_path} if it is stale")
    result = run_cli("run", "--repo", str(repo), "--no-publish", "--cycle", CYCLE, env={**os.environ, **run_env})
    assert result.code == 1
    assert result.stderr.strip() == f"error: {message}"
    release(holder)
    assert gateway.completions == []
    assert not lock_path.exists()


def test_a_stale_lock_from_a_dead_process_is_replaced_with_a_warning(repo: Path, run_env: dict, out: Output) -> None:
    lock_path = repo / "build" / LOCK_NAME
    lock_path.parent.mkdir(parents=True)
    pid = dead_pid()
    lock_path.write_text(json.dumps({"pid": pid, "host": socket.gethostname(), "started_at": "2026-07-01T06:17:00Z",
                                     "token": "feedface"}))
    outcome = refresh(repo, run_env, out.append, topics=["diloco-family"])
    assert outcome.exit_code == 0
    assert f"warning: replacing a stale lock left by pid {pid} (started 2026-07-01T06:17:00Z)" in out.text
    assert not lock_path.exists()


def test_lock_rules(tmp_path: Path, children: list) -> None:
    host = socket.gethostname()
    assert not is_stale(LockInfo(pid=1, host="another-host", started_at="", token="x"))
    assert not is_stale(None)
    assert is_stale(LockInfo(pid=dead_pid(), host=host, started_at="", token="x"))
    assert is_stale(LockInfo(pid=os.getpid(), host=host, started_at="", token="not-ours"))
    path = tmp_path / "build" / LOCK_NAME
    first = RepoLock(path, command="run")
    info = first.acquire()
    assert is_stale(LockInfo(pid=os.getpid(), host=host, started_at="", token=info.token)) is False
    # re-entrant within one process (`run` calls `publish`, which locks too), released by the outer holder
    inner = RepoLock(path, command="publish")
    assert inner.acquire() == info
    inner.release()
    assert json.loads(path.read_text())["token"] == info.token
    foreign = {"pid": 4242, "host": "ci-runner-7", "started_at": "2026-01-01T00:00:00Z", "token": "t",
               "command": "collect"}
    path.write_text(json.dumps(foreign))  # someone replaced it: our release must not delete theirs
    first.release()
    assert json.loads(path.read_text()) == foreign
    with pytest.raises(LockHeld, match="`collect`, pid 4242 on ci-runner-7 since 2026-01-01T00:00:00Z"):
        RepoLock(path).acquire()
    path.unlink()
    holder, pid, _ = hold_lock(path, "research", children)  # another process: refused, not re-entered
    with pytest.raises(LockHeld, match=f"`research`, pid {pid} since"):
        RepoLock(path).acquire()
    release(holder)


@pytest.mark.slow
def test_killed_mid_run_leaves_no_partial_report_and_the_next_run_redoes_exactly_that_leg(
        repo: Path, run_env: dict, gateway: Any, out: Output, children: list) -> None:
    topics = ["diloco-family", "verl-trl"]
    refresh(repo, run_env, out.append, topics=topics)
    report = repo / "research" / "02-diloco-family.md"
    before = report.read_text()
    path = repo / "topics" / "02-diloco-family.yaml"
    write_topic(repo, path.name, path.read_text().replace("title: DiLoCo family", "title: DiLoCo family, edited"))

    gateway.reset()
    gateway.set_scenario({"rules": [{"match": {"kind": "write"}, "delay_s": 8}]})
    # The delayed answer will find its client dead; keep the server's broken-pipe report out of the test log.
    gateway._server.handle_error = lambda request, client_address: None
    process = cli_process(repo, run_env, "--topics", ",".join(topics), "--no-publish")
    children.append(process)
    reader = LineReader(process)
    wait_for(lambda: any(c["kind"] == "write" for c in gateway.completions), what="the leg's writing call")
    os.killpg(process.pid, signal.SIGKILL)
    process.wait(10)
    assert "[02-diloco-family] started" in reader.text()
    assert report.read_text() == before, "a killed leg must leave the previous complete report"
    assert not [p.name for p in (repo / "research").iterdir() if p.name.startswith(".")]
    assert (repo / "build" / LOCK_NAME).exists()

    gateway.reset()
    out.clear()
    outcome = refresh(repo, run_env, out.append, topics=topics)
    assert "warning: replacing a stale lock left by pid" in out.text
    assert outcome.ran == ["02-diloco-family"] and sessions(gateway) == {"02-diloco-family"}
    assert outcome.stems("kept") == ["04-verl-trl"] and outcome.exit_code == 0
    assert report.read_text() != before


@pytest.mark.slow
def test_ctrl_c_stops_new_legs_releases_the_lock_and_exits_1(repo: Path, run_env: dict, gateway: Any,
                                                             children: list) -> None:
    gateway.set_scenario({"latency_s": 0.5})  # every call; the report needs three
    process = cli_process(repo, run_env, "--topics", "diloco-family,verl-trl", "--jobs", "1", "--no-publish")
    children.append(process)
    reader = LineReader(process)
    reader.wait_for("[02-diloco-family] step 1/")
    process.send_signal(signal.SIGINT)
    assert process.wait(60) == 1
    text = reader.text()
    assert "interrupted: no new legs start; giving 02-diloco-family up to" in text
    assert "run interrupted" in text and "the lock is released" in text
    assert not (repo / "build" / LOCK_NAME).exists()
    assert not (repo / "research" / "02-diloco-family.md").exists()
    assert "04-verl-trl" not in sessions(gateway)
    status = json.loads((repo / "build" / "legs" / "02-diloco-family.json").read_text())
    assert status["status"] == "failed" and "interrupted" in status["error"] and status["interrupted"] is True
