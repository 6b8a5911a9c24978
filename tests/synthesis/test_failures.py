"""Failure paths as users meet them: bad input, a missing key, a gateway that is down (the CLI's exit
codes and lines). What the synthesis does with invalid model output and a failed judge is tested at the
model seam (test_seam_rules.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from research_dispatch.core.errors import MissingKey
from tests.clirun import CliRun, run_cli


def cli(repo: Path, env: dict[str, str]) -> CliRun:
    """`synthesize` with the test's environment and `env`."""
    return run_cli("synthesize", "--repo", str(repo), "--cycle", "2026-H2", env={**os.environ, **env})


def test_bad_front_matter_is_exit_2_with_one_line_naming_file_and_field(planted: Path, synth_env, gateway) -> None:
    path = planted / "research" / "03-gamma.openai-gpt-5.md"
    path.write_text(path.read_text(encoding="utf-8").replace("route: exact", "route: sideways"), encoding="utf-8")
    result = cli(planted, synth_env)
    assert result.code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "research/03-gamma.openai-gpt-5.md" in lines[0] and "route" in lines[0]
    assert gateway.completions == []  # nothing was called
    assert not (planted / "framework").exists()


def test_the_cli_prints_a_summary_and_the_claim_diff(planted: Path, synth_env) -> None:
    result = cli(planted, synth_env)
    assert result.code == 0, result.output + result.stderr
    first = result.stdout.splitlines()[0]  # the progress lines went to stderr
    assert first.startswith("synthesized 6 report(s): 5 counted, 1 excluded")
    # the claims, checked: every planted statement is in its report and its page states it
    assert ("claims: 12 (12 anchored: 12 with a supported citation, 0 unsupported, 0 contradicted; 10 counted)"
            in first)  # 05-delta's two are excluded with their report
    # single-source flags count single-source findings only; sides held by one report are said apart
    assert ("findings: 1 convergent, 1 same-family, 2 divergent in 1 divergence(s) (1 without consensus; 2 divergence "
            "side(s) held by one report), 4 single-source (2 flagged, 2 where only one family was asked), 0 not "
            "counted, 1 excluded-only") in first
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
    assert result.code == 2 and "OPENROUTER_API_KEY" in result.stderr


def test_a_gateway_down_for_every_extraction_is_a_runtime_failure(planted: Path, synth_env, gateway) -> None:
    gateway.set_scenario({"rules": [{"match": {"schema": "claim_extraction"}, "status": 503}]})
    result = cli(planted, synth_env)
    assert result.code == 1
    assert "every extraction failed" in result.stderr and "503" in result.stderr
    assert not (planted / "framework").exists()
