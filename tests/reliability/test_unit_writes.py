"""A report, its call log and its evidence file are one unit: a full disk, a read-only directory or a kill
at ANY write leaves all three old or all three new, a status file that agrees with them, and `verify`
agreeing. The evidence of an unchanged leg is byte-identical on a re-run, so the seeded (old) unit's
evidence is made different first — one passage fewer, with the report's `evidence_sha256` naming it —
and an old report beside new evidence (or the reverse) shows as a hash that does not match.

The faults are injected at the operating-system layer (`tests/faultshim.py`): the Nth file operation
under `research/` and `build/` fails (ENOSPC, EROFS) or kills the process. Every operation of a leg's
write is hit in turn, not only the first. In-process runs cover the disk faults (the fault then
persists, as a full disk does, until the "next command"); the kills run `research` as a separate
process (a SIGKILL ends the process) and then `verify` as the next command (in process: tests/clirun.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from research_dispatch.config.plan import plan_legs
from research_dispatch.config.settings import load_settings
from research_dispatch.config.topics import load_topics
from research_dispatch.leg.evidence import sha256_text
from research_dispatch.leg.execute import run_leg
from research_dispatch.leg.files import complete_pending
from research_dispatch.leg.report import load_report
from research_dispatch.leg.verify import verify_report
from tests.clirun import run_cli
from tests.conftest import CANARY, ROOT, fast_retries
from tests.faultshim import CHILD, Faults

reliability = pytest.mark.reliability
CYCLE = "2026-H2"
STEM = "02-diloco-family"


def _leg(repo: Path) -> Any:
    settings = load_settings(repo)
    return settings, next(leg for leg in plan_legs(load_topics(repo, settings), settings) if leg.stem == STEM)


Files = tuple[str | None, str | None, str | None, str | None]  # report, call log, evidence, status


def _files(repo: Path) -> Files:
    def read(rel: str) -> str | None:
        path = repo / rel
        return path.read_text(encoding="utf-8") if path.exists() else None

    return (read(f"research/{STEM}.md"), read(f"research/{STEM}.calls.jsonl"),
            read(f"research/{STEM}.evidence.jsonl"), read(f"build/legs/{STEM}.json"))


def _watch(repo: Path) -> list[Path]:
    return [repo / "research", repo / "build" / "legs", repo / "build" / "pending"]


def assert_one_unit(repo: Path, old: Files, context: str) -> str:
    """All old or all new, the status agrees, and verify agrees. Returns "old" or "new"."""
    report, calls, evidence, status_text = _files(repo)
    assert report is not None and calls is not None and evidence is not None, context
    status = json.loads(status_text or "{}")
    meta_report = load_report(repo / "research" / f"{STEM}.md", repo=repo)
    row = verify_report(meta_report)
    assert row.verified and not row.problems, f"{context}: verify disagrees: {row.problems}"
    assert row.evidence_warnings == [], f"{context}: the evidence is not the report's: {row.evidence_warnings}"
    if (report, calls, evidence) == old[:3]:
        kind = "old"
    else:
        assert report != old[0] and calls != old[1] and evidence != old[2], f"{context}: some files new, some old"
        kind = "new"
    if status["status"] == "ok":
        assert status["body_sha256"] == meta_report.meta.body_sha256, f"{context}: status names another report"
    else:
        assert status["status"] == "failed" and kind == "old", f"{context}: {status}"
        assert status["cost_usd"] > 0 and status["calls"] > 0, f"{context}: the money of the failed leg is hidden"
    leftovers = [p.name for p in (repo / "research").iterdir() if p.name.startswith(".")]
    assert all(name.endswith(".tmp") for name in leftovers), f"{context}: {leftovers}"
    return kind


@pytest.fixture
def seeded(repo: Path, fake_env: dict[str, str], gateway: Any) -> Path:
    """A good report of the leg is already there (the old unit)."""
    fast_retries(repo)
    settings, leg = _leg(repo)
    assert run_leg(repo, settings, leg, env=fake_env, cycle=CYCLE).status == "ok"
    return repo


def older_unit(repo: Path, written: str) -> Files:
    """Make the unit in place differ from what a re-run writes (`written`: the leg's evidence, the same
    bytes every run), consistently: its evidence one passage short (of a source that keeps others) and
    the report's `evidence_sha256` naming that evidence. Returns the unit's files (the "old" ones of
    the next write)."""
    settings, leg = _leg(repo)
    evidence, report = repo / leg.evidence_relpath(settings), repo / leg.report_relpath(settings)
    lines = written.splitlines(keepends=True)
    urls = [json.loads(line)["url"] for line in lines]
    drop = next(i for i, url in enumerate(urls) if urls.count(url) > 1)
    older = "".join(lines[:drop] + lines[drop + 1:])
    evidence.write_text(older, encoding="utf-8")
    named = load_report(report, repo=repo).meta.evidence_sha256
    assert named is not None
    report.write_text(report.read_text(encoding="utf-8").replace(named, sha256_text(older)), encoding="utf-8")
    assert verify_report(load_report(report, repo=repo)).evidence_warnings == []
    return _files(repo)


def _count_ops(repo: Path, env: dict[str, str]) -> int:
    settings, leg = _leg(repo)
    with Faults(_watch(repo), "count") as faults:
        assert run_leg(repo, settings, leg, env=env, cycle=CYCLE).status == "ok"
    return len(faults.ops)


@pytest.mark.slow
@reliability(area="crash", case="disk full (ENOSPC) and read-only (EROFS) at each write of a leg's report, call "
                                "log, evidence file and status, persisting until the next command",
             expect="at every one of the ~16 operations: all three files old or all three new (never a new call log "
                    "or evidence file beside an old report), the status file agrees (ok naming the report's "
                    "body_sha256, or failed with the money spent), `verify` re-checks the route as exact and finds "
                    "the evidence the report names, the leg's cost is counted")
@pytest.mark.parametrize("kind", ["enospc", "erofs"])
def test_disk_faults_at_every_write_leave_one_consistent_unit(seeded: Path, fake_env: dict[str, str],
                                                               kind: str) -> None:
    repo = seeded
    settings, leg = _leg(repo)
    written = (repo / leg.evidence_relpath(settings)).read_text(encoding="utf-8")
    total = _count_ops(repo, fake_env)
    assert total >= 10, total  # calls, report, journal, renames, status: every step is a separate operation
    seen = set()
    for at in range(1, total + 1):
        old = older_unit(repo, written)
        with Faults(_watch(repo), kind, at) as faults:
            result = run_leg(repo, settings, leg, env=fake_env, cycle=CYCLE)
        context = f"{kind} at operation {at} ({faults.ops[at - 1][0]} {Path(faults.ops[at - 1][1]).name})"
        assert result.cost_usd > 0 and result.calls > 0, context  # money is never hidden
        if result.status == "failed":
            assert "could not write" in (result.error or "") or "not yet in place" in (result.error or ""), context
        complete_pending(repo, settings.build_dir)  # the disk is free again: the next command runs
        seen.add(assert_one_unit(repo, old, context))
    assert seen == {"old", "new"}  # faults before and after the commit point were both hit


@pytest.mark.e2e
@reliability(area="crash", case="`research` killed (SIGKILL) at each write of its report, call log, evidence file "
                                "and status",
             expect="after `verify` (the next command, which completes a committed unit): all three files old or all "
                    "three new, the status agrees, `verify` exits 0 with route exact and no evidence warning")
def test_a_kill_at_every_write_leaves_one_consistent_unit(seeded: Path, fake_env: dict[str, str],
                                                          tmp_path: Path) -> None:
    repo = seeded
    written = (repo / "research" / f"{STEM}.evidence.jsonl").read_text(encoding="utf-8")
    total = _count_ops(repo, fake_env)
    env = {k: v for k, v in __import__("os").environ.items()}
    env.update({"PYTHONPATH": str(ROOT), "FAULT_WATCH": ":".join(str(p) for p in _watch(repo))})
    seen = set()
    for at in range(1, total + 1):
        old = older_unit(repo, written)
        log = tmp_path / f"ops-{at}.log"
        child = subprocess.run([sys.executable, "-c", CHILD, "research", "diloco-family", "--repo", str(repo)],
                               env={**env, "FAULT_KIND": "kill", "FAULT_AT": str(at), "FAULT_LOG": str(log)},
                               capture_output=True, text=True, timeout=120, check=False)
        ops = log.read_text(encoding="utf-8").splitlines()
        context = f"kill at operation {at}: {ops[-1] if ops else '?'}"
        assert child.returncode == -9, f"{context}: {child.stdout}{child.stderr}"
        verify = run_cli("verify", "--repo", str(repo), f"research/{STEM}.md", env=env)
        assert verify.code == 0 and "exact" in verify.stdout, f"{context}: {verify.output}"
        seen.add(assert_one_unit(repo, old, context))
        assert CANARY["OPENROUTER_API_KEY"] not in verify.output
    assert seen == {"old", "new"}
