"""Failure paths: bad input, missing key, invalid model output, a gateway that is down, a failed judge."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from research_dispatch.cli import main
from research_dispatch.core.errors import MissingKey
from research_dispatch.synthesis.errors import SynthesisFailed
from tests.synthesis.conftest import ledger, statuses, structured_calls


def cli(repo: Path, env: dict[str, str]) -> object:
    return CliRunner().invoke(main, ["synthesize", "--repo", str(repo), "--cycle", "2026-H2"], env=env)


def test_bad_front_matter_is_exit_2_with_one_line_naming_file_and_field(planted: Path, synth_env, gateway) -> None:
    path = planted / "research" / "03-gamma.openai-gpt-5.md"
    path.write_text(path.read_text(encoding="utf-8").replace("route: exact", "route: sideways"), encoding="utf-8")
    result = cli(planted, synth_env)
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "research/03-gamma.openai-gpt-5.md" in lines[0] and "route" in lines[0]
    assert gateway.completions == []  # nothing was called
    assert not (planted / "framework").exists()


def test_the_cli_prints_a_summary_and_the_claim_diff(planted: Path, synth_env) -> None:
    result = cli(planted, synth_env)
    assert result.exit_code == 0, result.output + result.stderr
    first = result.stdout.splitlines()[0]  # the progress lines went to stderr
    assert first.startswith("synthesized 6 report(s): 5 counted, 1 excluded")
    # the claims, checked: every planted statement is in its report and its page states it
    assert ("claims: 12 (12 anchored: 12 with a supported citation, 0 unsupported, 0 contradicted; 10 counted)"
            in first)  # 05-delta's two are excluded with their report
    # single-source flags count single-source findings only; sides held by one report are said apart
    assert ("findings: 1 convergent, 1 same-family, 2 divergent in 1 divergence(s) (1 without consensus; 2 divergence "
            "side(s) held by one report), 4 single-source (2 flagged), 0 not counted, 1 excluded-only") in first
    # one citation-check call per report (each has fewer citations than one call holds), one judge call per decision
    assert "LLM calls: 16 (6 extraction, 0 cached; 6 citation check, 0 citations cached; 4 judge, 0 cached)" in first
    # a first run counts its divergences as new (and the PR body, which diffs the same way, inherits it)
    assert ("claim diff: 0 decisions changed, 0 lost a supported citation, 0 promoted to convergent, 0 lost support, "
            "1 new divergences, 9 new, 0 dropped") in result.output
    assert "wrote framework/planted.md, framework/claims.json, framework/synthesis.calls.jsonl" in result.output
    again = cli(planted, synth_env)
    assert "LLM calls: 0 (0 extraction, 6 cached; 0 citation check, 12 citations cached; 0 judge, 4 cached)" \
        in again.output
    assert "claim diff: no change" in again.output


def test_a_missing_key_is_bad_input_before_any_call(planted: Path, run_synthesis, gateway, synth_env) -> None:
    with pytest.raises(MissingKey):
        run_synthesis(planted, env={"OPENROUTER_BASE_URL": synth_env["OPENROUTER_BASE_URL"]})
    assert gateway.completions == []
    result = cli(planted, {"OPENROUTER_BASE_URL": synth_env["OPENROUTER_BASE_URL"], "OPENROUTER_API_KEY": ""})
    assert result.exit_code == 2 and "OPENROUTER_API_KEY" in result.stderr


def test_invalid_output_is_repaired_once_with_the_error_fed_back(planted: Path, run_synthesis, gateway) -> None:
    gateway.set_scenario({"rules": [{"match": {"schema": "claim_extraction", "session": "*:01-alpha"},
                                     "empty": True, "times": 1}]})
    result = run_synthesis(planted)
    calls = [c for c in structured_calls(gateway, "claim_extraction") if c["session"].endswith(":01-alpha")]
    assert len(calls) == 2 and result.extraction_calls == 7
    repair = calls[1]["request"]["messages"]
    assert repair[-1]["role"] == "user" and "not valid JSON" in repair[-1]["content"]
    assert statuses(ledger(planted))["rl-algorithm/grpo"] == "convergent"
    alpha = next(r for r in ledger(planted)["reports"] if r["stem"] == "01-alpha")
    assert alpha["extraction"]["status"] == "ok" and len(alpha["extraction"]["calls"]) == 2
    log = (planted / "framework" / "synthesis.calls.jsonl").read_text().splitlines()
    assert sum('"subject":"research/01-alpha.md"' in line for line in log) == 2


def test_output_invalid_twice_is_reported_not_dropped(planted: Path, run_synthesis, gateway) -> None:
    gateway.set_scenario({"rules": [{"match": {"schema": "claim_extraction", "session": "*:01-alpha"},
                                     "finish_reason": "length"}]})
    result = run_synthesis(planted)
    data = ledger(planted)
    alpha = next(r for r in data["reports"] if r["stem"] == "01-alpha")
    assert alpha["extraction"]["status"] == "failed" and "invalid structured output" in alpha["extraction"]["error"]
    assert alpha["claims"] == [] and len(alpha["extraction"]["calls"]) == 2
    assert any(item.startswith("Report 01-alpha could not be extracted") for item in data["limitations"])
    assert any("01-alpha" in w and "invalid structured output" in w for w in result.warnings)
    assert statuses(data)["rl-algorithm/grpo"] == "single_source"  # its support is honestly lower
    text = result.document_path.read_text(encoding="utf-8")
    assert "Report 01-alpha could not be extracted" in text and "extraction failed" in text
    # a failure is not cached: the next run tries again
    gateway.set_scenario({})
    again = run_synthesis(planted)
    assert again.extraction_calls == 1 and statuses(ledger(planted))["rl-algorithm/grpo"] == "convergent"


def test_a_gateway_down_for_every_extraction_is_a_runtime_failure(planted: Path, synth_env, gateway) -> None:
    gateway.set_scenario({"rules": [{"match": {"schema": "claim_extraction"}, "status": 503}]})
    result = cli(planted, synth_env)
    assert result.exit_code == 1
    assert "every extraction failed" in result.stderr and "503" in result.stderr
    assert not (planted / "framework").exists()


def test_every_extraction_failing_raises_synthesis_failed(planted: Path, run_synthesis, gateway) -> None:
    gateway.set_scenario({"rules": [{"match": {"schema": "claim_extraction"}, "status": 401}]})
    with pytest.raises(SynthesisFailed):
        run_synthesis(planted)


def test_a_failed_judge_leaves_claims_unaligned_and_says_so(planted: Path, run_synthesis, gateway) -> None:
    gateway.set_scenario({"rules": [{"match": {"schema": "claim_alignment"}, "status": 400}]})
    result = run_synthesis(planted)
    data = ledger(planted)
    batches = data["batches"]
    assert len(batches) == 4 and all(b["status"] == "failed" and b["judgement"] is None for b in batches)
    for batch in batches:
        assert any(item.startswith(f"Judge batch {batch['id']} failed") for item in data["limitations"])
    # recommendations naming the same pick are still merged by code; the decision table stays honest
    assert statuses(data)["rl-algorithm/grpo"] == "convergent"
    assert all(c["unaligned"] for c in data["clusters"] if c["batches"])
    # without a judge nobody confirmed that Ray and Monarch answer one decision: no divergence
    assert data["divergences"] == [] and statuses(data)["orchestration/monarch"] == "single_source"
    assert result.judge_calls == 0  # calls are counted by their CallRecords; an HTTP error has none
    assert len(structured_calls(gateway, "claim_alignment")) == 4  # a 400 is not retried
