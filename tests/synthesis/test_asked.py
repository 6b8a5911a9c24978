"""Labels that say what was asked (issue 29.7), at the model seam and in the PR body.

Two families are asked about storage, one about caching (a plan of one family per topic is the seed's).
A lone recommendation is "may be model bias" only where another family was asked and did not make it;
the agreement matrix tells a family that was not asked from one that was asked and took no side; the
PR body counts families and sources, never reports.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from research_dispatch.config.settings import load_settings
from research_dispatch.publish.prbody import agreement_matrix, claim_diff
from research_dispatch.synthesis import synthesize
from research_dispatch.synthesis.count.decisions import matrix
from tests.seam import Reply, ScriptedGateway, synthesis_model
from tests.synthesis.conftest import CYCLE, claim_json, ledger, say, write_pyproject, write_report

REPORTS = {"01-storage.openai": ("openai/gpt-5", "storage"), "02-storage.deepseek": ("deepseek/deepseek-v4-pro",
                                                                                     "storage"),
           "03-caching.google": ("google/gemini-3.1-pro-preview", "caching")}
POSTGRES = "Postgres is the primary database to adopt for the service"
REDIS = "Redis is the session cache to adopt for the service"
BACKUPS = "Nightly logical backups restore a 200 GB database in under an hour"


def run(tmp_path: Path) -> tuple[dict, str, Path]:
    repo = tmp_path / "asked"
    repo.mkdir()
    write_pyproject(repo)
    answers = {"01-storage.openai": [claim_json(POSTGRES, "storage", stance="recommend", decision="primary database",
                                                pick="Postgres")],
               "02-storage.deepseek": [claim_json(BACKUPS, "storage")],  # asked; no side taken
               "03-caching.google": [claim_json(REDIS, "caching", stance="recommend", decision="session cache",
                                                pick="Redis")]}
    gateway = ScriptedGateway(otherwise=synthesis_model)
    for stem, (model, topic) in REPORTS.items():
        write_report(repo, stem, model, ["placeholder"], topic=topic)
        say(repo, stem, [c["quote"] for c in answers[stem]])
        gateway.enqueue(Reply(content=json.dumps({"claims": answers[stem]})), session=f"*:synthesis:{stem}")
    result = synthesize(repo, load_settings(repo), env={}, cycle=CYCLE, gateway=gateway)
    return ledger(repo), result.document_path.read_text(encoding="utf-8"), repo


def test_may_be_model_bias_only_where_another_family_was_asked(tmp_path: Path) -> None:
    data, document, _repo = run(tmp_path)
    clusters = {c["pick"]: c for c in data["clusters"] if c["pick"]}
    assert clusters["Postgres"]["topics"] == ["storage"] and clusters["Postgres"]["asked"] == ["deepseek", "openai"]
    assert clusters["Redis"]["topics"] == ["caching"] and clusters["Redis"]["asked"] == ["google"]
    rows = document.split("## TL;DR — decision table", 1)[1].split("\n## ", 1)[0]
    assert re.search(r"\| Postgres \|[^\n]*\| single-source — may be model bias \|", rows)
    assert re.search(r"\| Redis \|[^\n]*\| single-source — only one family was asked \|", rows)
    flagged = document.split("### Flagged: single-source — may be model bias", 1)[1].split("\n### ", 1)[0]
    alone = document.split("### Flagged: single-source — only one family was asked", 1)[1].split("\n### ", 1)[0]
    assert "Postgres" in flagged and "Redis" not in flagged and "Redis" in alone and "Postgres" not in alone
    assert "1 flagged “single-source — may be model bias”, 1 flagged “single-source — only one family was asked”" \
        in " ".join(document.split())  # the method text is wrapped (issue 30.8)


def test_the_matrix_tells_not_asked_from_no_side(tmp_path: Path) -> None:
    data, document, repo = run(tmp_path)
    grid = matrix(data)
    assert grid.families == ("deepseek", "google", "openai")
    cells = {decision.question: dict(zip(grid.families, row, strict=True)) for decision, row in grid.rows}
    assert cells["primary database"] == {"deepseek": "no side", "google": "not asked", "openai": "for"}
    assert cells["session cache"] == {"deepseek": "not asked", "google": "for", "openai": "not asked"}
    shown = document.split("## Agreement matrix", 1)[1].split("\n## ", 1)[0]
    assert "| storage — primary database | no side | not asked | for |" in shown
    pr_matrix = agreement_matrix(repo / "framework" / "claims.json")
    assert pr_matrix is not None and "| storage — primary database | no side | not asked | for |" in pr_matrix


def test_the_pr_body_counts_families_and_sources_never_reports(tmp_path: Path) -> None:
    _data, _document, repo = run(tmp_path)
    markdown, short, _note = claim_diff(None, repo / "framework" / "claims.json", "framework/claims.json")
    assert markdown is not None and short is not None
    assert "(1 family, 1 source)" in markdown
    assert not re.search(r"\d+ reports?\b", markdown + short)
