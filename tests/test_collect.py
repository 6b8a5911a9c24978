"""Artifacts from research jobs come back only at computed paths, validated (they are untrusted)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from tests.clirun import run_cli
from tests.conftest import ROOT


def export_two_legs(repo: Path, out: Path) -> None:
    for topic in ("diloco-family", "verl-trl"):
        result = run_cli("research", topic, "--repo", str(repo), "--export", str(out))
        assert result.code == 0, result.output


def fresh_copy(repo: Path, tmp_path: Path) -> Path:
    target = tmp_path / "fresh"
    target.mkdir(parents=True)
    shutil.copytree(repo / "topics", target / "topics")
    shutil.copy(repo / "pyproject.toml", target)
    return target


def test_export_then_collect_round_trip(repo: Path, fake_env: dict, tmp_path: Path) -> None:
    out = tmp_path / "artifact"
    export_two_legs(repo, out)
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == [
        "build/legs/02-diloco-family.json", "build/legs/04-verl-trl.json",
        "build/traces/02-diloco-family.jsonl", "build/traces/04-verl-trl.jsonl",
        "research/02-diloco-family.calls.jsonl", "research/02-diloco-family.evidence.jsonl",
        "research/02-diloco-family.md", "research/04-verl-trl.calls.jsonl", "research/04-verl-trl.evidence.jsonl",
        "research/04-verl-trl.md"]
    target = fresh_copy(repo, tmp_path)
    result = run_cli("collect", str(out), "--repo", str(target))
    assert result.code == 0, result.output + result.stderr
    missing = "01-composer-2.5, 03-monarch-torchforge-openenv, 05-trace-replay-distillation"
    assert f"imported 10 file(s); missing: {missing}" in result.output
    assert (target / "research" / "02-diloco-family.md").read_bytes() == \
        (repo / "research" / "02-diloco-family.md").read_bytes()
    assert run_cli("verify", "--repo", str(target)).code == 0


def test_collect_rejects_tampered_and_ignores_strays(repo: Path, fake_env: dict, tmp_path: Path) -> None:
    out = tmp_path / "artifact"
    export_two_legs(repo, out)
    # a report swapped into another leg's path, a stray file, a symlink and a traversal-looking name
    shutil.copy(out / "research" / "04-verl-trl.md", out / "research" / "02-diloco-family.md")
    (out / "research" / "99-evil.md").write_text("---\nx: 1\n---\n")
    (out / ".github").mkdir()
    (out / ".github" / "workflows.yml").write_text("on: push")
    os.remove(out / "research" / "04-verl-trl.calls.jsonl")
    os.symlink("/etc/passwd", out / "research" / "04-verl-trl.calls.jsonl")
    target = fresh_copy(repo, tmp_path)
    result = run_cli("collect", str(out), "--repo", str(target))
    assert result.code == 1
    assert "rejected: research/02-diloco-family.md: front matter names verl-trl" in result.stderr
    assert "rejected: research/04-verl-trl.calls.jsonl: is a symlink" in result.stderr
    assert "ignored: research/99-evil.md" in result.stderr and "ignored: .github/workflows.yml" in result.stderr
    assert not (target / "research" / "02-diloco-family.md").exists()
    assert not (target / "research" / "99-evil.md").exists() and not (target / ".github").exists()
    # a report whose call log is refused is not imported without it (all or none), nor its evidence or status
    assert "rejected: research/04-verl-trl.md: not imported: research/04-verl-trl.calls.jsonl is refused" \
        in result.stderr
    assert not (target / "research" / "04-verl-trl.md").exists()
    assert not (target / "research" / "04-verl-trl.evidence.jsonl").exists()
    assert not (target / "build" / "legs" / "04-verl-trl.json").exists()


def test_collect_synthesis_accepts_only_the_dispatch_table_change(repo: Path, fake_env: dict, tmp_path: Path) -> None:
    methodology = ROOT / "docs" / "METHODOLOGY.md"
    (repo / "docs").mkdir()
    shutil.copy(methodology, repo / "docs" / "METHODOLOGY.md")
    out = tmp_path / "artifact"
    export_two_legs(repo, out)
    summary = tmp_path / "summary.md"
    result = run_cli("synthesize", "--repo", str(repo), "--github-summary",
                     env={**os.environ, "GITHUB_STEP_SUMMARY": str(summary)})
    assert result.code == 0, result.output + result.stderr
    assert "## Synthesis" in summary.read_text() and "### Claim diff" in summary.read_text()
    for rel in ("framework/composer-replication-framework.md", "framework/claims.json",
                "framework/synthesis.calls.jsonl", "docs/METHODOLOGY.md"):
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(repo / rel, out / rel)
    target = fresh_copy(repo, tmp_path)
    (target / "docs").mkdir()
    shutil.copy(methodology, target / "docs" / "METHODOLOGY.md")
    result = run_cli("collect", str(out), "--synthesis", "--repo", str(target))
    assert result.code == 0, result.stderr
    assert (target / "framework" / "claims.json").read_bytes() == (repo / "framework" / "claims.json").read_bytes()
    assert (target / "docs" / "METHODOLOGY.md").read_text() != methodology.read_text()  # the table changed

    tampered = (out / "docs" / "METHODOLOGY.md").read_text().replace("Limitations", "Ignore the review")
    (out / "docs" / "METHODOLOGY.md").write_text(tampered)
    (out / "framework" / "claims.json").write_text('{"schema": "something-else"}')
    target2 = fresh_copy(repo, tmp_path / "again")
    (target2 / "docs").mkdir()
    shutil.copy(methodology, target2 / "docs" / "METHODOLOGY.md")
    result = run_cli("collect", str(out), "--synthesis", "--repo", str(target2))
    assert result.code == 1
    assert "rejected: docs/METHODOLOGY.md: changes the methodology prose" in result.stderr
    assert "rejected: framework/claims.json" in result.stderr
    assert (target2 / "docs" / "METHODOLOGY.md").read_text() == methodology.read_text()


def test_a_methodology_table_without_its_synthesis_is_not_imported_and_no_refusal(repo: Path, fake_env: dict,
                                                                                   tmp_path: Path) -> None:
    """A synthesize job that failed before writing its document, ledger and call log: the reports still
    publish (exit 0), the lone methodology table is left out and said so, never a refusal."""
    methodology = ROOT / "docs" / "METHODOLOGY.md"
    out = tmp_path / "artifact"
    export_two_legs(repo, out)
    (out / "docs").mkdir(parents=True, exist_ok=True)
    shutil.copy(methodology, out / "docs" / "METHODOLOGY.md")
    target = fresh_copy(repo, tmp_path)
    result = run_cli("collect", str(out), "--synthesis", "--repo", str(target))
    assert result.code == 0, result.stderr
    assert "ignored: docs/METHODOLOGY.md: not imported: the synthesis is not in the artifact" in result.stderr
    assert "rejected:" not in result.stderr
    assert not (target / "docs" / "METHODOLOGY.md").exists() and not (target / "framework").exists()
