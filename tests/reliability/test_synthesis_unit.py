"""One synthesis unit (issue 31, finding 5): the document, the claims ledger, the call log and the
methodology table are written together (`leg/files.write_unit`, the journal the legs use).

Before: a kill or a full disk after the ledger's write left the old document beside the new ledger; every
later run then took that document for a hand edit (it is not what its ledger renders to) and kept it, and
publish committed it `Edited: yes` — the PR told reviewers a human had edited a crash. Now every write
of the unit is hit in turn (`tests/faultshim.py`: the Nth file operation under framework/, docs/ and
build/pending/ fails like a full disk, or kills the process), and after the next command the four files
are all the old ones or all the new ones, and the document is what its ledger renders to.

The kills run `synthesize` as a separate process (the process is the point); the disk faults run the
stage in process, the fault persisting until the "next command", as a full disk does.
"""
# ruff: noqa: F811 - the imported fixtures are the tests' arguments

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from research_dispatch.config.settings import load_settings
from research_dispatch.core.errors import DispatchError
from research_dispatch.leg.files import complete_pending
from research_dispatch.synthesis.stale import document_edited
from tests.conftest import ROOT
from tests.faultshim import CHILD, Faults
from tests.synthesis.conftest import CYCLE, PLANTED, planted, run_synthesis, say, statement, synth_env  # noqa: F401

reliability = pytest.mark.reliability
UNIT = ("framework/planted.md", "framework/claims.json", "framework/synthesis.calls.jsonl", "docs/METHODOLOGY.md")
Files = tuple[bytes | None, ...]


def _files(repo: Path) -> Files:
    return tuple((repo / rel).read_bytes() if (repo / rel).exists() else None for rel in UNIT)


def _restore(repo: Path, files: Files) -> None:
    for rel, data in zip(UNIT, files, strict=True):
        assert data is not None
        (repo / rel).write_bytes(data)
    shutil.rmtree(repo / "build" / "pending", ignore_errors=True)


def _watch(repo: Path) -> list[Path]:
    return [repo / "framework", repo / "docs", repo / "build" / "pending"]


@pytest.fixture
def two_units(planted: Path, run_synthesis: Any) -> tuple[Path, Files, Files]:
    """The planted repository with a methodology page, its synthesis (the old unit), then one report
    changed and synthesized again (the new unit: every one of the four files differs); the old unit is
    put back, so the next synthesis writes the new one again (its answers replayed from the cache)."""
    repo = planted
    (repo / "docs").mkdir()
    shutil.copy(ROOT / "docs" / "METHODOLOGY.md", repo / "docs" / "METHODOLOGY.md")
    run_synthesis(repo)
    old = _files(repo)
    _model, sentences, _route = PLANTED["02-beta"]
    say(repo, "02-beta", [*sentences, statement("orchestration-monarch", "monarch-torchforge-openenv")])
    report = repo / "research" / "02-beta.md"  # a new rationale: the methodology table changes too
    report.write_text(report.read_text(encoding="utf-8").replace("rationale of 02-beta", "rationale, revised"),
                      encoding="utf-8")
    run_synthesis(repo)
    new = _files(repo)
    assert all(a != b for a, b in zip(old, new, strict=True)), "the change must touch every file of the unit"
    _restore(repo, old)
    return repo, old, new


def assert_one_unit(repo: Path, old: Files, new: Files, context: str) -> str:
    """All four files old, or all four new; the document is its ledger's render (never a 'hand edit')."""
    now = _files(repo)
    states = [f"{rel}: {'old' if a == o else 'new' if a == n else 'other'}"
              for rel, a, o, n in zip(UNIT, now, old, new, strict=True)]
    assert now in (old, new), f"{context}: " + ", ".join(states)
    assert not document_edited(repo, load_settings(repo)), f"{context}: the document would count as a hand edit"
    leftovers = [p.name for d in ("framework", "docs") for p in (repo / d).iterdir() if p.name.startswith(".")]
    assert all(name.endswith(".tmp") for name in leftovers), f"{context}: {leftovers}"
    return "old" if now == old else "new"


def _count(repo: Path, run_synthesis: Any, old: Files) -> int:
    with Faults(_watch(repo), "count") as faults:
        run_synthesis(repo)
    _restore(repo, old)
    return len(faults.ops)


@pytest.mark.slow
@reliability(area="crash", case="disk full (ENOSPC) and read-only (EROFS) at each write of the synthesis' document, "
                                "ledger, call log and methodology table, persisting until the next command",
             expect="at every operation: the four files all old or all new after the next command, the document is "
                    "what its ledger renders to (never taken for a hand edit); the failure is a typed error saying "
                    "nothing changed or that the next command completes the write")
@pytest.mark.parametrize("kind", ["enospc", "erofs"])
def test_disk_faults_at_every_write_leave_one_synthesis_unit(two_units: tuple[Path, Files, Files],
                                                             run_synthesis: Any, kind: str) -> None:
    repo, old, new = two_units
    total = _count(repo, run_synthesis, old)
    assert total >= 12, total  # four temp files, the journal, four renames, its removal: each an operation
    seen = set()
    for at in range(1, total + 1):
        _restore(repo, old)
        with Faults(_watch(repo), kind, at) as faults:
            try:
                run_synthesis(repo)
            except DispatchError as exc:
                message = str(exc)
                assert "\n" not in message and ("the previous files are unchanged" in message
                                                or "the next research-dispatch command completes it" in message)
        context = f"{kind} at operation {at} ({faults.ops[at - 1][0]} {Path(faults.ops[at - 1][1]).name})"
        complete_pending(repo, load_settings(repo).build_dir)  # the disk is free again: the next command runs
        seen.add(assert_one_unit(repo, old, new, context))
    assert seen == {"old", "new"}


def _child_env(synth_env: dict[str, str], repo: Path) -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", ""), "NO_PROXY": "127.0.0.1,localhost",
            "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'scripts'}", **synth_env,
            "FAULT_WATCH": os.pathsep.join(str(p) for p in _watch(repo))}


@pytest.mark.e2e
@reliability(area="crash", case="`synthesize` killed (SIGKILL) at each write of its document, ledger, call log and "
                                "methodology table",
             expect="after the next command (`verify`, which completes a committed unit): the four files all old or "
                    "all new, the document is its ledger's render; a later `synthesize` regenerates instead of "
                    "keeping a 'hand edit'")
def test_a_kill_at_every_write_leaves_one_synthesis_unit(two_units: tuple[Path, Files, Files], run_synthesis: Any,
                                                         synth_env: dict[str, str], tmp_path: Path) -> None:
    repo, old, new = two_units
    total = _count(repo, run_synthesis, old)
    env = _child_env(synth_env, repo)
    seen = set()
    for at in range(1, total + 1):
        _restore(repo, old)
        log = tmp_path / f"ops-{at}.log"
        child = subprocess.run([sys.executable, "-c", CHILD, "synthesize", "--repo", str(repo), "--cycle", CYCLE],
                               env={**env, "FAULT_KIND": "kill", "FAULT_AT": str(at), "FAULT_LOG": str(log)},
                               capture_output=True, text=True, timeout=300, check=False)
        ops = log.read_text(encoding="utf-8").splitlines()
        context = f"kill at operation {at}: {ops[-1] if ops else '?'}"
        assert child.returncode == -9, f"{context}: {child.stdout}{child.stderr}"
        verify = subprocess.run([sys.executable, "-m", "research_dispatch", "verify", "--repo", str(repo)],
                                env=env, capture_output=True, text=True, timeout=120, check=False)
        assert "Traceback" not in verify.stderr, f"{context}: {verify.stderr}"
        seen.add(assert_one_unit(repo, old, new, context))
    assert seen == {"old", "new"}


@pytest.mark.slow
@reliability(area="crash", case="`synthesize` on a full disk (fresh process)",
             expect="exit 1 with one line: 'could not write framework/…: No space left on device (errno 28); the "
                    "previous files are unchanged' — no traceback, never 'internal error' (its cache writes failed "
                    "first: warnings, not the end); the previous synthesis intact")
def test_synthesize_on_a_full_disk_is_one_line(two_units: tuple[Path, Files, Files],
                                              synth_env: dict[str, str]) -> None:
    repo, old, _new = two_units
    shutil.rmtree(repo / "build" / "synthesis-cache")  # the paid calls are made again, and their cache writes fail
    env = {**_child_env(synth_env, repo), "FAULT_KIND": "enospc", "FAULT_AT": "1",
           "FAULT_WATCH": os.pathsep.join(str(p) for p in [*_watch(repo), repo / "build" / "synthesis-cache"])}
    child = subprocess.run([sys.executable, "-c", CHILD, "synthesize", "--repo", str(repo), "--cycle", CYCLE],
                           env=env, capture_output=True, text=True, timeout=300, check=False)
    assert child.returncode == 1, child.stdout + child.stderr
    errors = [line for line in child.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "No space left on device" in errors[0], child.stderr
    assert "the previous files are unchanged" in errors[0] and "Traceback" not in child.stderr
    assert "internal error" not in child.stdout + child.stderr
    assert _files(repo) == old
