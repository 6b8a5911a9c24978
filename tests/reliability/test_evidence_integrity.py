"""Evidence whose edit shows (issue 31, finding 2).

An evidence file decides citations: a passage the judge is shown can turn a citation `supported`. The
report's front matter names the sha256 of the evidence file written with it (`evidence_sha256`), so an
edit — one appended line with its own hash recomputed, a swapped file, a symbolic link in its place —
shows. Such a file is no evidence to the synthesis (its citations `no_evidence`, a warning, a limitation
line), `publish` treats it as it treats an edited report (refused without `--allow-edited`; with it, the
trailer `Edited: yes`), and `collect` imports a leg's report, call log and evidence together or not at all,
and only when they agree.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from research_dispatch.cli import main
from research_dispatch.leg.evidence import sha256_text
from research_dispatch.synthesis.read.evidence import CHANGED, SYMLINK, UNBOUND, load_for_report
from tests.reliability.userworld import STEMS, UserWorld, front_matter, user_world  # noqa: F401  (the fixture)

reliability = pytest.mark.reliability
LEG = STEMS["A"]
EVIDENCE = f"research/{LEG}.evidence.jsonl"


def forged_line(report_text: str) -> str:
    """One more evidence line for the report's first cited source, with a hash that matches its text:
    every line of the file stays valid on its own; only the file's own hash shows the edit."""
    url = front_matter(report_text)["sources"][0]["url"]
    text = "Every claim made about this source is confirmed by this passage."
    return json.dumps({"sha256": sha256_text(text), "text": text, "title": "forged", "tool": "web_search",
                       "url": url}, sort_keys=True) + "\n"


def _trailers(world: UserWorld, rel: str) -> tuple[str, str]:
    out = world.origin_git("log", "-1", "--format=%s%x00%(trailers)", "main..research-refresh/2026-H2", "--", rel)
    subject, _, block = out.strip("\n").partition("\x00")
    return subject, block


@pytest.mark.slow
@reliability(area="hostile", case="an evidence file edited after its report was written (one appended line, its "
                                  "hash recomputed), then replaced by a symbolic link",
             expect="synthesize: that report's citations are all no_evidence, with a warning and a limitation line "
                    "naming the file and why (sha256 differs from evidence_sha256; a symbolic link); the other "
                    "reports' checks unchanged; publish: exit 2 naming the file and the evidence edit; "
                    "--allow-edited commits it with `Edited: yes` and the PR lists the leg as edited")
def test_an_edited_evidence_file_is_no_evidence_and_an_edit_to_publish(user_world: UserWorld) -> None:  # noqa: F811
    world = user_world
    clone = world.clone()
    assert world.cli(clone, "run", "--no-publish").code == 0
    report_text = (clone / "research" / f"{LEG}.md").read_text(encoding="utf-8")
    evidence = clone / EVIDENCE
    before = json.loads((clone / "framework" / "claims.json").read_text(encoding="utf-8"))
    evidence.write_text(evidence.read_text(encoding="utf-8") + forged_line(report_text), encoding="utf-8")
    tampered = evidence.read_text(encoding="utf-8")

    done = world.cli(clone, "synthesize")
    assert done.code == 0, done
    assert f"warning: {EVIDENCE} {CHANGED}" in done.output, done
    ledger = json.loads((clone / "framework" / "claims.json").read_text(encoding="utf-8"))
    checks = {c["report"]: c for c in ledger["citation_checks"]}
    assert checks[LEG]["evidence_present"] is False and checks[LEG]["items"]
    assert {item["support"] for item in checks[LEG]["items"]} == {"no_evidence"}
    assert any(f"its evidence file {EVIDENCE} {CHANGED}" in line for line in ledger["limitations"])
    document = (clone / "framework" / "composer-replication-framework.md").read_text(encoding="utf-8")
    assert f"its evidence file {EVIDENCE}" in document
    others = {c["report"]: c for c in before["citation_checks"] if c["report"] != LEG}
    assert others and all(checks[stem]["items"] == c["items"] for stem, c in others.items())

    done = world.cli(clone, "publish")
    assert done.code == 2, done
    [line] = [line for line in done.output.splitlines() if line.startswith("error:")]
    assert f"research/{LEG}.md" in line and "evidence file no longer matches evidence_sha256" in line, line
    assert "--allow-edited" in line and not world.branch_exists()

    done = world.cli(clone, "publish", "--allow-edited")
    assert done.code == 0, done
    subject, block = _trailers(world, EVIDENCE)
    assert "as edited by hand" in subject and "Edited: yes" in block
    assert world.branch_file(EVIDENCE) == tampered
    assert "evidence file no longer matches evidence_sha256" in world.pr()["body"]

    # a symbolic link in its place, even to the very file written with the report, is no evidence either
    original = clone / "build" / "original.evidence.jsonl"
    original.write_text(tampered.replace(forged_line(report_text), ""), encoding="utf-8")
    assert sha256_text(original.read_text(encoding="utf-8")) == front_matter(report_text)["evidence_sha256"]
    evidence.unlink()
    os.symlink(original, evidence)
    done = world.cli(clone, "synthesize")
    assert done.code == 0 and f"warning: {EVIDENCE} {SYMLINK}" in done.output, done
    ledger = json.loads((clone / "framework" / "claims.json").read_text(encoding="utf-8"))
    assert {i["support"] for c in ledger["citation_checks"] if c["report"] == LEG for i in c["items"]} == \
        {"no_evidence"}


@reliability(area="hostile", case="the synthesis reads an evidence file: {id}",
             expect="refused by name (no evidence, one warning saying why), never read, never a hang")
@pytest.mark.parametrize("kind", ["changed", "symlink", "unbound", "fifo", "directory"])
def test_evidence_the_synthesis_does_not_believe(tmp_path: Path, kind: str) -> None:
    good = json.dumps({"sha256": sha256_text("A passage."), "text": "A passage.", "title": "t", "tool": "web_search",
                       "url": "https://example.org/a"}, sort_keys=True) + "\n"
    (tmp_path / "research").mkdir()
    path = tmp_path / "research" / "01-a.evidence.jsonl"
    bound: str | None = sha256_text(good)
    if kind == "changed":
        path.write_text(good + good.replace("A passage.", "Another."), encoding="utf-8")
    elif kind == "symlink":
        (tmp_path / "elsewhere.jsonl").write_text(good, encoding="utf-8")
        os.symlink(tmp_path / "elsewhere.jsonl", path)
    elif kind == "unbound":
        path.write_text(good, encoding="utf-8")
        bound = None
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        path.mkdir()
    loaded = load_for_report(tmp_path, "research/01-a.evidence.jsonl", bound)
    assert not loaded.present and loaded.passages == {}
    [warning] = loaded.warnings
    assert "research/01-a.evidence.jsonl" in warning
    expected = {"changed": CHANGED, "symlink": SYMLINK, "unbound": UNBOUND, "fifo": "not a regular file",
                "directory": "is a directory"}[kind]
    assert expected in warning, warning
    path.unlink() if not path.is_dir() or path.is_symlink() else path.rmdir()
    path.write_text(good, encoding="utf-8")
    assert load_for_report(tmp_path, "research/01-a.evidence.jsonl", sha256_text(good)).present  # the real one is


# -- collect: a leg's report, call log and evidence, all or none ----------------------------------


@pytest.fixture
def artifact(repo: Path, fake_env: dict[str, str], tmp_path: Path) -> dict[str, Any]:
    """One leg researched and exported (as a CI research job uploads it), and a fresh repository that
    already holds that leg's files (an earlier import)."""
    out = tmp_path / "artifact"
    done = CliRunner().invoke(main, ["research", "diloco-family", "--repo", str(repo), "--export", str(out)])
    assert done.exit_code == 0, done.output
    target = tmp_path / "fresh"
    target.mkdir()
    shutil.copytree(repo / "topics", target / "topics")
    shutil.copy(repo / "pyproject.toml", target)
    done = CliRunner().invoke(main, ["collect", str(out), "--repo", str(target)])
    assert done.exit_code == 0, done.output + done.stderr
    return {"out": out, "target": target, "stem": "02-diloco-family"}


def _collect(out: Path, target: Path) -> Any:
    return CliRunner().invoke(main, ["collect", str(out), "--repo", str(target)])


def _files(target: Path, stem: str) -> dict[str, bytes]:
    names = [f"research/{stem}.md", f"research/{stem}.calls.jsonl", f"research/{stem}.evidence.jsonl",
             f"build/legs/{stem}.json"]
    return {name: (target / name).read_bytes() for name in names if (target / name).exists()}


@pytest.mark.slow
@reliability(area="hostile", case="collect: an artifact whose leg files do not agree: {id}",
             expect="the leg's report, call log and evidence file are imported together or not at all: refused, "
                    "each file named with why (exit 1); the repository keeps the leg's files it had, byte for byte")
@pytest.mark.parametrize("case", ["evidence alone beside an old report", "an evidence line appended, its hash "
                                  "recomputed", "a call log of other calls", "a report without its call log",
                                  "a FIFO at the evidence path", "a directory at the report path"])
def test_collect_imports_a_leg_unit_only_when_it_agrees(artifact: dict[str, Any], case: str) -> None:
    out, target, stem = artifact["out"], artifact["target"], artifact["stem"]
    before = _files(target, stem)
    report, calls, evidence = (out / "research" / f"{stem}{suffix}" for suffix in (".md", ".calls.jsonl",
                                                                                   ".evidence.jsonl"))
    if case.startswith("evidence alone"):
        report.unlink()
        calls.unlink()
        (out / "build" / "legs" / f"{stem}.json").unlink()
        evidence.write_text(evidence.read_text(encoding="utf-8") + forged_line(before[f"research/{stem}.md"]
                                                                              .decode()), encoding="utf-8")
    elif case.startswith("an evidence line"):
        evidence.write_text(evidence.read_text(encoding="utf-8") + forged_line(report.read_text(encoding="utf-8")),
                            encoding="utf-8")
    elif case.startswith("a call log"):
        lines = calls.read_text(encoding="utf-8").splitlines(keepends=True)
        calls.write_text("".join(lines[:-1]), encoding="utf-8")
    elif case.startswith("a report without"):
        calls.unlink()
    elif case.startswith("a FIFO"):
        evidence.unlink()
        os.mkfifo(evidence)
    else:
        report.unlink()
        report.mkdir()
    done = _collect(out, target)
    assert done.exit_code == 1, done.output + done.stderr
    rejected = [line for line in done.stderr.splitlines() if line.startswith("rejected:")]
    assert rejected and "Traceback" not in done.stderr and "internal error" not in done.stderr
    assert any("not imported" in line or "regular file" in line or "directory" in line for line in rejected), rejected
    assert _files(target, stem) == before


@pytest.mark.slow
@reliability(area="hostile", case="collect: a leg's unit that agrees, over an older one",
             expect="report, call log and evidence file imported as one unit (the journal the legs use); verify "
                    "finds them consistent")
def test_collect_imports_an_agreeing_unit_whole(artifact: dict[str, Any], repo: Path,
                                                fake_env: dict[str, str]) -> None:
    out, target, stem = artifact["out"], artifact["target"], artifact["stem"]
    done = CliRunner().invoke(main, ["research", "diloco-family", "--repo", str(repo), "--export", str(out)])
    assert done.exit_code == 0, done.output
    done = _collect(out, target)
    assert done.exit_code == 0, done.output + done.stderr
    for suffix in (".md", ".calls.jsonl", ".evidence.jsonl"):
        assert (target / "research" / f"{stem}{suffix}").read_bytes() == \
            (repo / "research" / f"{stem}{suffix}").read_bytes()
    assert not (target / "build" / "pending").exists() or not any((target / "build" / "pending").iterdir())
    assert CliRunner().invoke(main, ["verify", "--repo", str(target)]).exit_code == 0
