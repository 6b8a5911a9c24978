"""The researcher loop answers model mistakes and enforces caps (real clients against the fakes)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from research_dispatch.cli import main
from tests.conftest import write_topic


def run_leg(repo: Path) -> tuple[int, dict, list[dict]]:
    result = CliRunner().invoke(main, ["research", "diloco-family", "--repo", str(repo)])
    status = json.loads((repo / "build" / "legs" / "02-diloco-family.json").read_text())
    trace_path = repo / "build" / "traces" / "02-diloco-family.jsonl"
    trace = [json.loads(line) for line in trace_path.read_text().splitlines()]
    return result.exit_code, status, trace


def with_budget(repo: Path, budget: str) -> None:
    path = repo / "topics" / "02-diloco-family.yaml"
    write_topic(repo, path.name, path.read_text() + f"budget: {budget}\n")


def test_malformed_tool_arguments_are_answered_as_tool_errors(repo: Path, fake_env: dict, gateway) -> None:
    gateway.set_scenario({"rules": [{"on_call": 1, "malformed_tool_args": True}]})
    code, status, trace = run_leg(repo)
    assert code == 0 and status["status"] == "ok"
    errors = [e for e in trace if e["event"] == "tool" and e["is_error"]]
    assert errors and errors[0]["detail"]["error"] == "malformed_arguments"
    tool_messages = [m for m in gateway.completions[1]["request"]["messages"] if m["role"] == "tool"]
    assert "arguments were not valid JSON" in tool_messages[0]["content"]


def test_unknown_tool_and_missing_arguments_are_tool_errors(repo: Path, fake_env: dict, gateway) -> None:
    gateway.set_scenario({"rules": [{"on_call": 1, "unknown_tool": "write_file"},
                                    {"on_call": 2, "missing_tool_args": True}]})
    code, status, trace = run_leg(repo)
    assert code == 0, status
    kinds = [e["detail"].get("error") for e in trace if e["event"] == "tool" and e["is_error"]]
    assert kinds[:2] == ["unknown_tool", "invalid_arguments"]


def test_short_draft_is_sent_back_for_expansion(repo: Path, fake_env: dict, gateway) -> None:
    gateway.set_scenario({"rules": [{"match": {"kind": "write"}, "times": 1, "short_draft": True}]})
    code, status, _ = run_leg(repo)
    assert code == 0 and status["status"] == "ok" and 2000 <= status["words"] <= 2500
    asks = [m["content"] for c in gateway.completions for m in c["request"]["messages"][-1:] if m["role"] == "user"]
    assert any(a.startswith("Your draft has") and "Expand it" in a for a in asks)


def test_truncated_output_is_continued(repo: Path, fake_env: dict, gateway) -> None:
    gateway.set_scenario({"rules": [{"match": {"kind": "write"}, "times": 1, "finish_reason": "length"}]})
    code, status, _ = run_leg(repo)
    assert code == 0 and status["status"] == "ok", status
    assert any(c["kind"] == "continue" for c in gateway.completions)


def test_step_cap_forces_the_report_and_marks_the_leg_degraded(repo: Path, fake_env: dict, gateway) -> None:
    with_budget(repo, "{max_steps: 2}")
    _code, status, _ = run_leg(repo)
    assert len(gateway.completions) <= 2
    assert status["status"] in ("degraded", "failed")
    assert any("step budget" in r or "step cap" in r for r in status["reasons"]), status


def test_dollar_cap_stops_the_loop(repo: Path, fake_env: dict, gateway) -> None:
    gateway.set_scenario({"pricing": {"*": {"prompt": 2000.0, "completion": 8000.0}}})
    with_budget(repo, "{max_cost_usd: 0.5}")
    _code, status, _ = run_leg(repo)
    assert any("dollar" in r for r in status["reasons"]), status
    assert status["status"] in ("degraded", "failed")


def test_web_text_is_wrapped_and_labelled_untrusted(repo: Path, fake_env: dict, gateway) -> None:
    run_leg(repo)
    messages = gateway.completions[-1]["request"]["messages"]
    system = messages[0]["content"]
    assert "untrusted web content" in system and "Write between 2000 and 2500 words." in system
    tool = next(m["content"] for m in messages if m["role"] == "tool")
    assert tool.startswith('<tool_result tool="web_search" status="ok">') and '<source id="S1"' in tool
