"""The counting rules and the diff by decision (issue 23, points 4 and 6), as a user meets them: real
reports whose bodies say what the scripted extractor quotes, their evidence files, and
`research-dispatch synthesize` run against the fake gateway (its judges: alignment by
decision, citations by the documented lexical rule). The same rules at the model seam: test_counting.py.
"""

from __future__ import annotations

from pathlib import Path

from tests.synthesis.conftest import SOURCES, scenario_repo, synthesize_cli, write_evidence
from tests.synthesis.test_scenarios import by_pick, rec, run, table

ORCHESTRATION = "orchestration layer"
RL = "RL algorithm for post-training"


def orchestration(pick: str, condition: str | None = None) -> dict:
    return rec(pick, ORCHESTRATION, layer="orchestration", condition=condition)


def rl(pick: str, *, against: bool = False) -> dict:
    claim = rec(pick, RL, layer="RL algorithm")
    if against:
        text = f"We do not recommend {pick} as the {RL}"
        claim.update(statement=text, quote=text, position="against")
    return claim


def test_we_do_not_recommend_x_is_a_divergence_against_x(tmp_path: Path, gateway, synth_env) -> None:
    """Why: "We do not recommend GRPO" was counted as support for GRPO (convergent, three families)."""
    repo = scenario_repo(tmp_path, "negation", {"01-a": ("openai/gpt-5", "exact"),
                                                "02-b": ("deepseek/deepseek-v4-pro", "exact"),
                                                "03-c": ("google/gemini-3.1-pro-preview", "exact")})
    result, data, document = run(repo, gateway, synth_env, {"01-a": [rl("GRPO")], "02-b": [rl("GRPO", against=True)],
                                                             "03-c": [rl("GRPO")]})
    assert result.code == 0, result.stderr
    assert not [c for c in data["clusters"] if c["status"] == "convergent"]
    [divergence] = data["divergences"]
    assert divergence["kind"] == "contradiction" and divergence["tie"] is False
    assert [(p["label"], p["position"], p["reports"]) for p in divergence["positions"]] == [
        ("GRPO", "for", ["01-a", "03-c"]), ("against GRPO", "against", ["02-b"])]
    assert divergence["line"].startswith("Use GRPO today, avoid GRPO when")
    matrix = document.split("## Agreement matrix", 1)[1].split("\n## ", 1)[0]
    assert "| RL algorithm — RL algorithm for post-training | against GRPO | GRPO | GRPO |" in matrix


def test_agreement_on_one_shared_page_says_so(tmp_path: Path, gateway, synth_env) -> None:
    """Why: two families that cite only the same page counted as two independent confirmations."""
    repo = scenario_repo(tmp_path, "shared", {"01-a": ("openai/gpt-5", "exact"),
                                              "02-b": ("deepseek/deepseek-v4-pro", "exact")})
    result, data, document = run(repo, gateway, synth_env, {"01-a": [rl("GRPO")], "02-b": [rl("GRPO")]})
    assert result.code == 0, result.stderr
    grpo = by_pick(data)["GRPO"]
    assert grpo["status"] == "convergent" and grpo["shared_source"] is True and grpo["sources"] == [SOURCES[0][0]]
    assert any(r.endswith("| **convergent** — one shared source |") for r in table(document))
    assert "**Convergent — one shared source**" in document
    # the document shows each report's words and the passage that supports them, with its link
    block = document.split("## Convergent findings", 1)[1].split("\n## ", 1)[0]
    assert "[01-a](<../research/01-a.md#findings>) (openai), § Findings: “GRPO is the RL algorithm" in block
    assert f"[\\[1\\]](<{SOURCES[0][0]}>) supports it: “GRPO is the RL algorithm" in block


def test_a_second_report_of_one_family_never_breaks_a_family_tie(tmp_path: Path, gateway, synth_env) -> None:
    """Why: "families, then reports" let a second anthropic report break a 1:1 family tie."""
    repo = scenario_repo(tmp_path, "tie", {"01-a": ("deepseek/deepseek-v4-pro", "exact"),
                                           "02-b": ("anthropic/claude-sonnet-4.6", "exact"),
                                           "03-c": ("anthropic/claude-opus-4.5", "exact")})
    result, data, document = run(repo, gateway, synth_env, {"01-a": [orchestration("Monarch")],
                                                             "02-b": [orchestration("Ray")],
                                                             "03-c": [orchestration("Ray")]})
    assert result.code == 0, result.stderr
    [divergence] = data["divergences"]
    assert divergence["tie"] is True
    assert divergence["line"] == "No consensus (1 family each): Monarch; or Ray."
    ray = next(p for p in divergence["positions"] if p["label"] == "Ray")
    assert ray["reports"] == ["02-b", "03-c"] and ray["families"] == ["anthropic"]
    assert any("| **divergent** — no consensus |" in r for r in table(document))


def test_an_acronym_and_its_expansion_are_one_pick(tmp_path: Path, gateway, synth_env) -> None:
    """Why: "GRPO" and "Group Relative Policy Optimization" became a three-way "no consensus"."""
    repo = scenario_repo(tmp_path, "alias", {"01-a": ("openai/gpt-5", "exact"),
                                             "02-b": ("deepseek/deepseek-v4-pro", "exact"),
                                             "03-c": ("google/gemini-3.1-pro-preview", "exact")})
    result, data, _document = run(repo, gateway, synth_env, {
        "01-a": [rl("GRPO")], "02-b": [rl("Group Relative Policy Optimization")],
        "03-c": [rl("Group Relative Policy Optimization (GRPO)")]})
    assert result.code == 0, result.stderr
    assert data["divergences"] == []
    [cluster] = [c for c in data["clusters"] if c["pick_key"] == "grpo"]
    assert cluster["status"] == "convergent" and cluster["reports"] == ["01-a", "02-b", "03-c"]
    picks = {c["report"]: (c["pick"], c["pick_key"]) for c in data["claims"]}
    assert picks["02-b"] == ("Group Relative Policy Optimization", "grpo")  # the report's name, one key


def test_a_flipped_divergence_is_listed_by_decision(tmp_path: Path, gateway, synth_env) -> None:
    """Why: a refresh in which the favoured side flipped (2:1 → 1:2) said "claim diff: no change"."""
    repo = scenario_repo(tmp_path, "flip", {"01-a": ("openai/gpt-5", "exact"),
                                            "02-b": ("deepseek/deepseek-v4-pro", "exact"),
                                            "03-c": ("google/gemini-3.1-pro-preview", "exact")})
    answers = {"01-a": [orchestration("Ray")], "02-b": [orchestration("Ray")],
               "03-c": [orchestration("Monarch", "once its API stabilises")]}
    result, before, _ = run(repo, gateway, synth_env, answers)
    assert result.code == 0, result.stderr
    [divergence] = before["divergences"]
    assert divergence["line"] == "Use Ray today, switch to Monarch once its API stabilises."
    answers["02-b"] = [orchestration("Monarch", "once its API stabilises")]
    result, after, _ = run(repo, gateway, synth_env, answers)
    assert result.code == 0, result.stderr
    [divergence] = after["divergences"]
    assert divergence["line"].startswith("The support favours Monarch once its API stabilises")
    out = result.stdout
    assert "claim diff: no change" not in out and "claim diff: 1 decisions changed" in out
    assert "favourite changed: Ray → Monarch" in out
    assert "before: Use Ray today, switch to Monarch once its API stabilises." in out
    assert "after: The support favours Monarch once its API stabilises" in out
    # every report cites the same page: two families, one distinct source
    assert "sides before: Ray: 2 families (deepseek, openai), 1 source; Monarch: 1 family (google), 1 source" in out
    assert "sides after: Monarch: 2 families (deepseek, google), 1 source; Ray: 1 family (openai), 1 source" in out


def test_a_claim_that_lost_its_supported_citation_is_listed(tmp_path: Path, gateway, synth_env) -> None:
    repo = scenario_repo(tmp_path, "lost", {"01-a": ("openai/gpt-5", "exact"),
                                            "02-b": ("deepseek/deepseek-v4-pro", "exact")})
    answers = {"01-a": [rl("GRPO")], "02-b": [rl("PPO")]}
    result, before, _ = run(repo, gateway, synth_env, answers)
    assert result.code == 0, result.stderr
    key = next(c["key"] for c in before["claims"] if c["report"] == "02-b")
    # the page 02-b cites no longer says anything of the kind (its evidence is all that changed)
    write_evidence(repo, "02-b", [(SOURCES[0][0], "Bananas ripen faster next to apples in a paper bag.")])
    gateway.set_scenario({"rules": []})
    again = synthesize_cli(repo, synth_env)
    assert again.code == 0, again.stderr
    assert "1 lost a supported citation" in again.stdout
    assert f"  {key}: " in again.stdout
    assert f"(supported by {SOURCES[0][0]} → unsupported)" in again.stdout
