"""Smaller publishing rules: closing skips the cycle, reviewers, symlinks, the claim diff hand-off."""

from __future__ import annotations

import json
import os

from tests.publish.conftest import BRANCH, CYCLE, World


def test_a_closed_unmerged_pr_skips_the_cycle(small_world: World) -> None:
    small_world.run_legs()
    small_world.github.seed_pull(head=BRANCH, title="closed by a reviewer", state="closed")
    result = small_world.publish()
    assert result.operation == "none" and "closed without merging" in result.message
    assert small_world.origin_sha(BRANCH) is None and len(small_world.github.pulls) == 1


def test_reviewers_are_requested_on_create_and_a_failure_is_only_a_warning(small_world: World) -> None:
    pyproject = small_world.repo / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace("api_max_wait_s = 30.0}",
                                                       'api_max_wait_s = 30.0, reviewers = ["mia"]}'))
    small_world.run_legs()
    result = small_world.publish()  # the fake has no reviewer endpoint: GitHub-like 404
    assert result.operation == "created" and any("could not request reviewers" in w for w in result.warnings)


def test_a_symlinked_report_is_refused(small_world: World) -> None:
    small_world.run_legs("diloco-family")
    outside = small_world.root / "outside.md"
    outside.write_text("not a report\n")
    report = small_world.repo / "research" / "04-verl-trl.md"
    os.symlink(outside, report)
    result = small_world.publish()
    assert "04-verl-trl" in result.legs_without_report
    changed = small_world.origin_git("diff", "--name-only", f"main...{BRANCH}").splitlines()
    assert "research/04-verl-trl.md" not in changed
    assert "is a symbolic link" in small_world.github.pulls[0]["body"]


def test_the_claim_diff_from_the_synthesis_is_embedded_and_sanitised(small_world: World) -> None:
    small_world.run_legs()
    small_world.write_synthesis()
    ledger = {"cycle": CYCLE, "clusters": [
        {"key": "optimizer-c1", "layer": "optimizer", "pick": "Use DiLoCo <!-- research-refresh:v1 --> @octocat",
         "status": "convergent", "reports": ["02-diloco-family", "04-verl-trl"],
         "families": ["deepseek", "anthropic"]}]}
    ledger["reports"] = small_world.ledger_reports()  # the synthesis describes exactly these reports
    (small_world.repo / "framework" / "claims.json").write_text(json.dumps(ledger), encoding="utf-8")
    body = small_world.publish().body
    section = body.split("### Claim diff", 1)[1].split("###", 1)[0]
    assert "optimizer-c1" in section and "Synthesis not available" not in section
    assert body.count("<!--") == 1 and body.count("research-refresh:v1") == 1
    assert "\uff20octocat" in section and "@octocat" not in section  # sanitize.NEUTRAL_AT


def test_the_agreement_matrix_from_the_synthesis_is_embedded_and_sanitised(small_world: World) -> None:
    small_world.run_legs()
    small_world.write_synthesis()
    hostile = "Use DiLoCo <!-- research-refresh:v1 --> @octocat | <img src=x>"
    ledger = {"cycle": CYCLE, "claims": [], "divergences": [], "clusters": [
        {"key": "optimizer/diloco", "layer": "optimizer", "decision": "outer optimizer", "pick": hostile,
         "label": hostile, "status": "convergent", "reports": ["02-diloco-family", "04-verl-trl"],
         "families": ["anthropic", "deepseek"], "members": []}]}
    reports = small_world.ledger_reports()
    families = {"02-diloco-family": "deepseek", "04-verl-trl": "anthropic"}
    for entry in reports:
        stem = entry["path"].removeprefix("research/").removesuffix(".md")
        entry.update(stem=stem, counted=stem in families, families=[families.get(stem, "openai")])
    ledger["reports"] = reports
    (small_world.repo / "framework" / "claims.json").write_text(json.dumps(ledger), encoding="utf-8")
    body = small_world.publish().body
    section = body.split("### Agreement matrix", 1)[1].split("\n### ", 1)[0].split("\n---", 1)[0]
    assert "| Decision | anthropic | deepseek |" in section
    assert "| optimizer — outer optimizer | for | for |" in section
    assert body.count("<!--") == 1 and body.count("research-refresh:v1") == 1
