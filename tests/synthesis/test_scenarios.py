"""The scenarios of issue 12's "Why" (and issue 10's plan rule), run as a user runs them.

Each test writes real reports, scripts what the extractor says about each one (the fake gateway answers
that report's extraction call with a chosen structured answer), and runs `research-dispatch synthesize`
against the fake gateway. The judge is the fake's, which follows the judge
prompt: it compares recommendations that answer the same decision. What is asserted is what a reviewer
reads: the ledger, the decision table and the document.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.clirun import CliRun
from tests.synthesis.conftest import (
    claim_json,
    say,
    scenario_repo,
    scripted_extraction,
    synthesize_cli,
    write_pyproject,
    write_report,
)

CACHE = "cache store for session data"
DATABASE = "primary database"


def rec(pick: str, decision: str, layer: str = "storage", condition: str | None = None,
        confidence: str = "medium") -> dict[str, Any]:
    return claim_json(f"{pick} is the {decision} to adopt for the service", layer, stance="recommend",
                      decision=decision, pick=pick, condition=condition, confidence=confidence)


def run(repo: Path, gateway: Any, env: dict[str, str], answers: dict[str, list[dict[str, Any]]],
        *args: str) -> tuple[CliRun, dict[str, Any], str]:
    """Script each report's extraction, with the report saying what its claims quote (and its evidence
    backing each sentence), then run `synthesize`."""
    for stem, claims in answers.items():
        say(repo, stem, [c["quote"] for c in claims])
    gateway.set_scenario({"rules": [scripted_extraction(stem, claims) for stem, claims in answers.items()]})
    result = synthesize_cli(repo, env, *args)
    assert "Traceback" not in result.stderr, result.stderr
    ledger_path = repo / "framework" / "claims.json"
    data = json.loads(ledger_path.read_text(encoding="utf-8")) if ledger_path.exists() else {}
    document = repo / "framework" / "planted.md"
    return result, data, document.read_text(encoding="utf-8") if document.exists() else ""


def table(document: str) -> list[str]:
    section = document.split("## TL;DR — decision table", 1)[1].split("\n## ", 1)[0]
    return [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| Layer")]


def by_pick(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["pick"]: c for c in data["clusters"] if c["pick"]}


def test_picks_for_different_decisions_are_not_a_divergence(tmp_path: Path, gateway, synth_env) -> None:
    """Why 1: Redis for caching next to a convergent Postgres for the database turned Postgres divergent."""
    repo = scenario_repo(tmp_path, "storage", {"01-a": ("openai/gpt-5", "exact"),
                                               "02-b": ("deepseek/deepseek-v4-pro", "exact"),
                                               "03-c": ("google/gemini-3.1-pro-preview", "exact")})
    result, data, document = run(repo, gateway, synth_env, {
        "01-a": [rec("Postgres", DATABASE), rec("Redis", CACHE)],  # one report, two things in one layer
        "02-b": [rec("Postgres", DATABASE)],
        "03-c": [rec("Postgres", DATABASE)],
    })
    assert result.code == 0, result.stderr
    clusters = by_pick(data)
    assert clusters["Postgres"]["status"] == "convergent" and len(clusters["Postgres"]["families"]) == 3
    assert clusters["Redis"]["status"] == "single_source" and clusters["Redis"]["flagged"] is True
    assert data["divergences"] == []
    rows = table(document)
    # every report cites the same page for it: convergent, and said to rest on one shared source
    assert any("| Postgres |" in r and r.endswith("| **convergent** — one shared source |") for r in rows)
    convergent = document.split("## Convergent findings", 1)[1].split("\n## ", 1)[0]
    assert "Postgres" in convergent and "None this cycle" not in convergent
    # the judge saw both picks together (rival picks of one layer always meet it) and kept them apart
    [batch] = data["batches"]
    assert {k.split("#")[0] for k in batch["ids"].values()} == {"01-a", "02-b", "03-c"}


def test_one_report_holding_both_sides_is_not_a_divergence_with_itself(tmp_path: Path, gateway,
                                                                        synth_env) -> None:
    """Why 1: one report recommending two picks for one decision produced a divergence with itself."""
    repo = scenario_repo(tmp_path, "self", {"01-a": ("openai/gpt-5", "exact"),
                                            "02-b": ("deepseek/deepseek-v4-pro", "exact")})
    # the fake judge sets every pick of one decision against the others, even two of the same report
    result, data, _ = run(repo, gateway, synth_env, {
        "01-a": [rec("Redis", CACHE), rec("Memcached", CACHE)],
        "02-b": [rec("Postgres", DATABASE)],
    })
    assert result.code == 0, result.stderr
    assert [g["relation"] for g in data["batches"][0]["judgement"]["groups"]] == ["alternatives"]
    assert data["divergences"] == []  # its sides would share all their reports
    clusters = by_pick(data)
    assert clusters["Redis"]["status"] == clusters["Memcached"]["status"] == "single_source"
    assert clusters["Redis"]["contradicts"] == [clusters["Memcached"]["key"]]  # kept for audit


def test_a_report_on_both_sides_counts_for_neither(tmp_path: Path, gateway, synth_env) -> None:
    repo = scenario_repo(tmp_path, "both", {"01-a": ("openai/gpt-5", "exact"),
                                            "02-b": ("deepseek/deepseek-v4-pro", "exact"),
                                            "03-c": ("google/gemini-3.1-pro-preview", "exact")})
    result, data, document = run(repo, gateway, synth_env, {
        "01-a": [rec("Redis", CACHE), rec("Memcached", CACHE)],
        "02-b": [rec("Redis", CACHE)],
        "03-c": [rec("Memcached", CACHE)],
    })
    assert result.code == 0, result.stderr
    [divergence] = data["divergences"]
    sides = {p["label"]: p["reports"] for p in divergence["positions"]}
    assert sides == {"Redis": ["02-b"], "Memcached": ["03-c"]}  # disjoint
    assert divergence["ambivalent_reports"] == ["01-a"] and divergence["tie"] is True
    assert "Counted for no side, because they hold more than one" in document


def test_equal_support_is_no_consensus_and_more_support_is_favoured(tmp_path: Path, gateway, synth_env) -> None:
    """Why 2: with 1-vs-1 support the "use X today" pick was chosen alphabetically."""
    repo = scenario_repo(tmp_path, "tie", {"01-a": ("openai/gpt-5", "exact"),
                                           "02-b": ("deepseek/deepseek-v4-pro", "exact")})
    answers = {"01-a": [rec("Ray", "orchestration layer", layer="orchestration", condition="today")],
               "02-b": [rec("Monarch", "orchestration layer", layer="orchestration",
                            condition="once its API stabilises")]}
    result, data, document = run(repo, gateway, synth_env, answers)
    assert result.code == 0, result.stderr
    [divergence] = data["divergences"]
    assert divergence["tie"] is True
    assert divergence["line"] == ("No consensus (1 family each): Monarch, once its API stabilises; or Ray, today.")
    assert "favour" not in divergence["line"] and not divergence["line"].startswith("Use")
    assert any("No consensus" in r and r.endswith("| **divergent** — no consensus |") for r in table(document))
    assert all(c["flagged"] for c in data["clusters"])  # both sides rest on one report each
    # ... and are counted as one-report sides, never among the single-source flags
    assert data["counts"]["flagged"] == 0 and data["counts"]["flagged_sides"] == 2

    write_report(repo, "03-c", "google/gemini-3.1-pro-preview", ["The report 03-c states its findings"])
    answers["03-c"] = [rec("Ray", "orchestration layer", layer="orchestration")]
    result, data, document = run(repo, gateway, synth_env, answers)
    [divergence] = data["divergences"]
    assert divergence["tie"] is False
    assert divergence["line"] == "Use Ray today, switch to Monarch once its API stabilises."
    assert [p["label"] for p in divergence["positions"]] == ["Ray", "Monarch"]
    assert "**Use Ray today, switch to Monarch once its API stabilises.**" in document


def test_an_excluded_contrary_report_does_not_strip_the_counted_pick(tmp_path: Path, gateway, synth_env) -> None:
    """Why 3: an unverified report contradicting a verified one removed the verified pick from the table."""
    repo = scenario_repo(tmp_path, "excluded", {"01-a": ("openai/gpt-5", "exact"),
                                                "02-b": ("deepseek/deepseek-v4-pro", "exact")})
    answers = {"01-a": [rec("Postgres", DATABASE)], "02-b": [rec("Postgres", DATABASE)]}
    result, before, document_before = run(repo, gateway, synth_env, answers)
    assert result.code == 0, result.stderr
    write_report(repo, "03-c", "moonshotai/kimi-k2-thinking", ["The report states its findings"],
                 route="model_fallback")
    answers["03-c"] = [rec("MySQL", DATABASE, confidence="high")]
    result, data, document = run(repo, gateway, synth_env, answers)
    assert result.code == 0, result.stderr
    postgres = by_pick(data)["Postgres"]
    assert postgres["status"] == "convergent" and postgres["pick"] == "Postgres"
    # the same cluster; only what the excluded report adds beside it differs (its contrary claim, and the
    # judge call of this decision, which now holds that claim too)
    assert {k: v for k, v in postgres.items() if k not in ("contrary_excluded", "batches")} == \
           {k: v for k, v in by_pick(before)["Postgres"].items() if k not in ("contrary_excluded", "batches")}
    assert data["divergences"] == []
    mysql = by_pick(data)["MySQL"]
    assert mysql["status"] == "excluded" and postgres["contrary_excluded"] == mysql["members"]
    assert table(document) == table(document_before)  # the excluded report changes no counted row
    block = document.split("### storage — Postgres", 1)[1].split("\n### ", 1)[0]
    assert "Contradicted by reports excluded from support (not counted):" in block and "MySQL" in block


def test_route_exact_with_route_verified_false_is_not_counted(tmp_path: Path, gateway, synth_env) -> None:
    """Why 4: `route: exact` with `route_verified: false` in the front matter was counted as verified."""
    repo = tmp_path / "strict"
    repo.mkdir()
    write_pyproject(repo)
    write_report(repo, "01-a", "openai/gpt-5", ["The report states its findings"])
    write_report(repo, "02-b", "deepseek/deepseek-v4-pro", ["The report states its findings"], route_verified=False)
    result, data, _ = run(repo, gateway, synth_env, {"01-a": [rec("Postgres", DATABASE)],
                                                     "02-b": [rec("Postgres", DATABASE)]})
    assert result.code == 0, result.stderr
    reports = {r["stem"]: r for r in data["reports"]}
    assert reports["02-b"]["counted"] is False and reports["02-b"]["route_verified"] is False
    assert reports["02-b"]["route"] == "unverified"
    assert "front matter says route_verified: false" in reports["02-b"]["route_problems"]
    assert by_pick(data)["Postgres"]["status"] == "single_source"


def test_a_failed_report_is_never_counted_and_says_why(tmp_path: Path, gateway, synth_env) -> None:
    """Why 5: a report whose front matter says `status: failed` was counted; its limitation had no reason."""
    repo = tmp_path / "failed"
    repo.mkdir()
    write_pyproject(repo, ", count_unverified = true")  # not even this counts a failed report
    write_report(repo, "01-a", "openai/gpt-5", ["The report states its findings"])
    write_report(repo, "02-b", "deepseek/deepseek-v4-pro", ["The report states its findings"], status="failed",
                 status_reasons=["step budget reached before the report was written"])
    result, data, document = run(repo, gateway, synth_env, {"01-a": [rec("Postgres", DATABASE)],
                                                             "02-b": [rec("Postgres", DATABASE)]})
    assert result.code == 0, result.stderr
    assert [r["stem"] for r in data["reports"]] == ["01-a"]
    assert data["skipped"] == [{"stem": "02-b", "path": "research/02-b.md", "kind": "failed",
                                "reason": "status failed: step budget reached before the report was written"}]
    assert by_pick(data)["Postgres"]["status"] == "single_source"
    assert any("02-b" in item and "step budget reached" in item for item in data["limitations"])
    assert "warning: research/02-b.md: not counted, status failed: step budget reached" in result.stdout
    assert "`research/02-b.md` — status failed: step budget reached before the report was written" in document
    assert "02-b" not in [s.split("#")[0] for s in gateway_sessions(gateway)]  # never even extracted


def gateway_sessions(gateway: Any) -> list[str]:
    return [str(c["session"]).rsplit(":", 1)[-1] for c in gateway.completions]


def test_a_first_run_counts_its_divergences_as_new(tmp_path: Path, gateway, synth_env) -> None:
    """Why 6: a first run reported "0 new divergences"; divergence sides were unflagged."""
    repo = scenario_repo(tmp_path, "first", {"01-a": ("openai/gpt-5", "exact"),
                                             "02-b": ("deepseek/deepseek-v4-pro", "exact"),
                                             "03-c": ("google/gemini-3.1-pro-preview", "exact")})
    answers = {"01-a": [rec("Ray", "orchestration layer", layer="orchestration")],
               "02-b": [rec("Ray", "orchestration layer", layer="orchestration")],
               "03-c": [rec("Monarch", "orchestration layer", layer="orchestration")]}
    result, data, _ = run(repo, gateway, synth_env, answers)
    assert result.code == 0, result.stderr
    assert "1 new divergences" in result.stdout
    assert by_pick(data)["Monarch"]["flagged"] is True and by_pick(data)["Ray"]["flagged"] is False
    assert "0 single-source (0 flagged)" in result.stdout.splitlines()[0]  # a side is no single-source flag
    assert "1 divergence side(s) held by one report" in result.stdout.splitlines()[0]
    again, _, _ = run(repo, gateway, synth_env, answers)
    assert "claim diff: no change" in again.stdout


def test_counted_fallbacks_count_under_the_family_that_served_them(tmp_path: Path, gateway, synth_env) -> None:
    """Why 7: with count_unverified the family of a model-fallback report was the requested one."""
    repo = tmp_path / "fallback"
    repo.mkdir()
    write_pyproject(repo, ", count_unverified = true")
    write_report(repo, "01-a", "deepseek/deepseek-v4-pro", ["The report states its findings"])
    write_report(repo, "02-b", "moonshotai/kimi-k2-thinking", ["The report states its findings"],
                 route="model_fallback", served="deepseek/deepseek-v3.2")
    result, data, document = run(repo, gateway, synth_env, {"01-a": [rec("Postgres", DATABASE)],
                                                             "02-b": [rec("Postgres", DATABASE)]})
    assert result.code == 0, result.stderr
    reports = {r["stem"]: r for r in data["reports"]}
    assert reports["02-b"]["counted"] is True and reports["02-b"]["families"] == ["deepseek"]
    postgres = by_pick(data)["Postgres"]
    assert postgres["status"] == "same_family" and postgres["families"] == ["deepseek"]  # not "independent"
    assert any("under the families its call log says served it (deepseek; served by deepseek/deepseek-v3.2)" in item
               for item in data["limitations"])
    assert ("under the families their call logs say served them: [02-b](<../research/02-b.md>) (deepseek), served by "
            "deepseek/deepseek-v3.2") in document


def test_source_descriptions_are_dropped_and_cannot_converge(tmp_path: Path, gateway, synth_env) -> None:
    """Why 8: claims were source descriptions, and two reports quoting one description came out convergent."""
    repo = scenario_repo(tmp_path, "descriptions", {"01-a": ("openai/gpt-5", "exact"),
                                                    "02-b": ("deepseek/deepseek-v4-pro", "exact")})
    description = ("Repository for torchtitan, PyTorch's reference platform for large-scale generative-model "
                   "training using native PyTorch features")
    finding = "Torchtitan trains with FSDP2 and pipeline parallelism without model code changes"
    answers = {stem: [claim_json(description, "training"), claim_json(finding, "training"),
                      claim_json("HybridFlow: a flexible and efficient RLHF framework", "training")]
               for stem in ("01-a", "02-b")}
    result, data, document = run(repo, gateway, synth_env, answers)
    assert result.code == 0, result.stderr
    statements = {c["statement"] for c in data["claims"]}
    assert statements == {finding}
    [cluster] = data["clusters"]
    assert cluster["status"] == "convergent" and cluster["summary"] == finding
    dropped = {n["statement"]: n["reason"] for n in data["reports"][0]["extraction"]["not_findings"]}
    assert dropped == {description: "describes a source rather than asserting a finding",
                       "HybridFlow: a flexible and efficient RLHF framework": "restates a source's title"}
    assert data["counts"]["not_findings"] == 4
    # each drop is said out loud, with its reason, as the extractor's words (issue 29.5)
    said = [line for line in data["limitations"] if "was dropped: it" in line]
    assert len(said) == 4 and data["counts"]["dropped_claims"] == 4
    assert (f"Report 01-a: the extracted statement “{description}” was dropped: it describes a source rather than "
            "asserting a finding (the extractor's words, not the report's).") in data["limitations"]
    assert "4 claims extracted from counted reports could not be located, checked or counted" in " ".join(
        document.split())  # the method text is wrapped (issue 30.8)


def topic(repo: Path, name: str, topic_id: str, models: list[str]) -> None:
    lines = [f"id: {topic_id}", f"title: {topic_id}", "scope: |", "  Which storage to use.", "models:"]
    for model in models:
        lines += [f"  - model: {model}", "    rationale: test"]
    (repo / "topics").mkdir(exist_ok=True)
    (repo / "topics" / name).write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_reports_outside_the_plan_are_ignored_and_named(tmp_path: Path, gateway, synth_env) -> None:
    """Issue 10, point 2: a renamed topic's or a dropped model's report is never counted."""
    repo = tmp_path / "plan"
    repo.mkdir()
    write_pyproject(repo)
    topic(repo, "01-storage.yaml", "storage", ["openai/gpt-5", "deepseek/deepseek-v4-pro"])
    write_report(repo, "01-storage.openai-gpt-5", "openai/gpt-5", ["The report states its findings"],
                 topic="storage")
    write_report(repo, "01-storage.deepseek-deepseek-v4-pro", "deepseek/deepseek-v4-pro",
                 ["The report states its findings"], topic="storage")
    # the topic was called "db" before it was renamed, and google was dropped from it
    write_report(repo, "01-db", "google/gemini-3.1-pro-preview", ["The report states its findings"], topic="db")
    write_report(repo, "01-storage.google-gemini-3.1-pro-preview", "google/gemini-3.1-pro-preview",
                 ["The report states its findings"], topic="storage")
    answers = {stem: [rec("Postgres", DATABASE)] for stem in
               ("01-storage.openai-gpt-5", "01-storage.deepseek-deepseek-v4-pro", "01-db",
                "01-storage.google-gemini-3.1-pro-preview")}
    result, data, document = run(repo, gateway, synth_env, answers)
    assert result.code == 0, result.stderr
    assert sorted(r["stem"] for r in data["reports"]) == ["01-storage.deepseek-deepseek-v4-pro",
                                                          "01-storage.openai-gpt-5"]
    ignored = {s["stem"]: s["reason"] for s in data["skipped"]}
    assert set(ignored) == {"01-db", "01-storage.google-gemini-3.1-pro-preview"}
    assert all(reason.startswith("not a planned leg") for reason in ignored.values())
    assert by_pick(data)["Postgres"]["reports"] == ["01-storage.deepseek-deepseek-v4-pro", "01-storage.openai-gpt-5"]
    assert "01-db.md" not in document.split("## Reports excluded from support", 1)[0]  # never linked as support
    assert "`research/01-db.md` — not a planned leg" in document
    assert "warning: research/01-db.md: ignored, not a planned leg" in result.stdout
    assert not {"01-db", "01-storage.google-gemini-3.1-pro-preview"} & set(gateway_sessions(gateway))
