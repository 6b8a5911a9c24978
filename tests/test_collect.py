"""Artifacts from research jobs come back only at computed paths, validated (they are untrusted)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from click.testing import CliRunner

from research_dispatch.cli import main


def export_two_legs(repo: Path, out: Path) -> None:
    for topic in ("diloco-family", "verl-trl"):
        result = CliRunner().invoke(main, ["research", topic, "--repo", str(repo), "--export", str(out)])
        assert result.exit_code == 0, result.output


def fresh_copy(repo: Path, tmp_path: Path) -> Path:
    target = tmp_path / "fresh"
    target.mkdir()
    shutil.copytree(repo / "topics", target / "topics")
    shutil.copy(repo / "pyproject.toml", target)
    return target


def test_export_then_collect_round_trip(repo: Path, fake_env: dict, tmp_path: Path) -> None:
    out = tmp_path / "artifact"
    export_two_legs(repo, out)
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == [
        "build/legs/02-diloco-family.json", "build/legs/04-verl-trl.json",
        "build/traces/02-diloco-family.jsonl", "build/traces/04-verl-trl.jsonl",
        "research/02-diloco-family.calls.jsonl", "research/02-diloco-family.md",
        "research/04-verl-trl.calls.jsonl", "research/04-verl-trl.md"]
    target = fresh_copy(repo, tmp_path)
    result = CliRunner().invoke(main, ["collect", str(out), "--repo", str(target)])
    assert result.exit_code == 0, result.output + result.stderr
    assert "imported 8 file(s); 3 leg(s) without a report" in result.output
    assert (target / "research" / "02-diloco-family.md").read_bytes() == \
        (repo / "research" / "02-diloco-family.md").read_bytes()
    assert CliRunner().invoke(main, ["verify", "--repo", str(target)]).exit_code == 0


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
    result = CliRunner().invoke(main, ["collect", str(out), "--repo", str(target)])
    assert result.exit_code == 1
    assert "rejected: research/02-diloco-family.md: front matter names verl-trl" in result.stderr
    assert "rejected: research/04-verl-trl.calls.jsonl: is a symlink" in result.stderr
    assert "ignored: research/99-evil.md" in result.stderr and "ignored: .github/workflows.yml" in result.stderr
    assert not (target / "research" / "02-diloco-family.md").exists()
    assert not (target / "research" / "99-evil.md").exists() and not (target / ".github").exists()
    assert (target / "research" / "04-verl-trl.md").exists()
