"""The evidence file travels with its report: written by `research`, read by `verify` and `collect`, as
a user types them, against the module's fake gateway and search server (issue 23, point 1).

What is shown: a real leg writes `research/<stem>.evidence.jsonl` covering every cited source with
only texts that reached the model (compared with the request bodies the fake gateway received); an
unchanged leg re-run writes the same bytes; `verify` names a cited source whose evidence lines were
deleted by hand, and an older report without evidence, as warnings that leave the route verdict alone
(also in `--github-summary`); `collect` imports the file and refuses a damaged line, naming it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from research_dispatch.leg.evidence import sha256_text
from tests.bounds.conftest import child_env, make_repo
from tests.cli.conftest import Fakes
from tests.cli.test_legs import STEM, Researched, research
from tests.clirun import run_cli

REPORT, EVIDENCE = f"research/{STEM}.md", f"research/{STEM}.evidence.jsonl"


@pytest.fixture(scope="module")
def leg(tmp_path_factory: pytest.TempPathFactory, fakes: Fakes) -> Researched:
    fakes.gateway.reset()
    done = research(tmp_path_factory.mktemp("evidence"), fakes, export=True)
    assert done.done.code == 0, done.done.output
    return done


def _front(repo: Path) -> dict[str, object]:
    import yaml

    return yaml.safe_load((repo / REPORT).read_text(encoding="utf-8").split("---\n")[1])


def _lines(repo: Path) -> list[dict[str, str]]:
    return [json.loads(line) for line in (repo / EVIDENCE).read_text(encoding="utf-8").splitlines()]


def _shown_texts(fakes: Fakes) -> str:
    """Everything the gateway's requests showed the model of the sources, whitespace-normalised: the tool
    results, and the writing call's dossier (a user message: the report is written from every passage
    shown, a search of the last research turn included)."""
    texts = [m.get("content") or "" for c in fakes.gateway.completions for m in c["request"]["messages"]
             if m.get("role") in ("tool", "user") and isinstance(m.get("content"), str)]
    return " ".join(" ".join(t.split()) for t in texts)


def copy(repo: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(repo, tmp_path / "repo", symlinks=True))


@pytest.mark.slow  # 1.5 s of CPU: the gateway's every request searched for every evidence line
def test_research_keeps_what_the_researcher_was_shown_of_every_cited_source(leg: Researched, fakes: Fakes) -> None:
    front, lines = _front(leg.repo), _lines(leg.repo)
    cited = {s["url"] for s in front["sources"]}  # type: ignore[attr-defined]
    assert {line["url"] for line in lines} == cited  # every cited source, and only those
    shown = _shown_texts(fakes)
    for line in lines:
        assert line["tool"] in ("web_search", "web_extract")
        assert " ".join(line["text"].split()) in shown, line["text"][:120]  # only what reached the model
        assert line["sha256"] == sha256_text(line["text"])
    assert [(x["url"], x["sha256"]) for x in lines] == sorted((x["url"], x["sha256"]) for x in lines)
    assert front["evidence_sha256"] == sha256_text((leg.repo / EVIDENCE).read_text(encoding="utf-8"))
    assert {"web_search", "web_extract"} == {line["tool"] for line in lines}
    done = run_cli("verify", "--repo", str(leg.repo), env=child_env())
    assert done.code == 0 and "warning:" not in done.output, done.output
    assert leg.export is not None and (leg.export / EVIDENCE).read_bytes() == (leg.repo / EVIDENCE).read_bytes()


def test_an_unchanged_leg_rerun_writes_the_same_evidence_bytes(leg: Researched, fakes: Fakes, tmp_path: Path) -> None:
    repo = copy(leg.repo, tmp_path)
    before = (repo / EVIDENCE).read_bytes()
    done = run_cli("research", "diloco-family", "--repo", str(repo), env=fakes.env())
    assert done.code == 0, done.output
    assert (repo / EVIDENCE).read_bytes() == before
    assert _front(repo)["evidence_sha256"] == _front(leg.repo)["evidence_sha256"]


def test_verify_names_a_cited_source_whose_evidence_was_deleted_as_a_warning(leg: Researched, tmp_path: Path) -> None:
    repo = copy(leg.repo, tmp_path)
    front = _front(repo)
    victim = front["sources"][1]  # type: ignore[index]
    kept = [line for line in (repo / EVIDENCE).read_text(encoding="utf-8").splitlines(keepends=True)
            if json.loads(line)["url"] != victim["url"]]
    (repo / EVIDENCE).write_text("".join(kept), encoding="utf-8")
    summary = tmp_path / "summary.md"
    summary.write_text("", encoding="utf-8")
    done = run_cli("verify", "--github-summary", "--repo", str(repo),
                   env=child_env({"GITHUB_STEP_SUMMARY": str(summary)}))
    assert done.code == 0, done.output  # a route is about models: the verdict stands
    assert "exact" in done.stdout.splitlines()[1] and "problem:" not in done.stdout
    warnings = [line for line in done.stdout.splitlines() if line.startswith("warning:")]
    assert warnings == [
        f"warning: {REPORT}: {EVIDENCE} is not the evidence file written with the report (it was changed or "
        "replaced; its evidence_sha256 differs)",
        f"warning: {REPORT}: 1 cited source(s) without evidence: [{victim['id']}] {victim['url']}"]
    text = summary.read_text(encoding="utf-8")
    shown = victim["url"].replace("://", "\uff1a//")  # the summary is rendered by GitHub: no autolink (issue 31.3)
    assert "## Route fidelity" in text and "**Evidence**" in text and f"[{victim['id']}] {shown}" in text


def test_an_older_report_without_evidence_is_still_verified_and_says_so(leg: Researched, tmp_path: Path) -> None:
    repo = copy(leg.repo, tmp_path)
    report = repo / REPORT
    text = report.read_text(encoding="utf-8")
    lines = [line for line in text.split("\n") if not line.startswith("evidence_sha256:")]
    report.write_text("\n".join(lines), encoding="utf-8")  # the front matter only: the body is untouched
    (repo / EVIDENCE).unlink()
    done = run_cli("verify", "--repo", str(repo), env=child_env())
    assert done.code == 0, done.output
    assert done.stdout.splitlines()[-1] == (f"warning: {REPORT}: no evidence file ({EVIDENCE}): the report predates "
                                            "evidence files, so its citations cannot be checked")


def test_collect_imports_the_evidence_and_refuses_a_damaged_line_naming_it(leg: Researched, tmp_path: Path) -> None:
    assert leg.export is not None
    target = make_repo(tmp_path / "fresh", ("02-",))
    done = run_cli("collect", str(leg.export), "--repo", str(target), env=child_env())
    assert done.code == 0, done.output
    assert (target / EVIDENCE).read_bytes() == (leg.repo / EVIDENCE).read_bytes()

    artifact = Path(shutil.copytree(leg.export, tmp_path / "tampered"))
    rows = (artifact / EVIDENCE).read_text(encoding="utf-8").splitlines()
    forged = json.loads(rows[2])
    forged["text"] += " It also says the opposite."  # a passage the model never saw, under the old hash
    rows[2] = json.dumps(forged, sort_keys=True)
    (artifact / EVIDENCE).write_text("\n".join(rows) + "\n", encoding="utf-8")
    other = make_repo(tmp_path / "other", ("02-",))
    done = run_cli("collect", str(artifact), "--repo", str(other), env=child_env())
    assert done.code == 1, done.output
    assert f"rejected: {EVIDENCE}: line 3: not an evidence line (sha256: not the sha256 of text)" in done.stderr
    # a leg's report, call log and evidence are imported all or none (issue 31.2): nothing of this leg
    assert not (other / EVIDENCE).exists() and not (other / REPORT).exists()
