"""The synthesis' rules at the model seam: repair of invalid output, failed extractions, a failed judge.

`synthesize` (the whole pipeline: extraction, citation checks, alignment, classification, rendering, the
ledger and the cache) runs in-process over a scripted model (`tests/seam.py`): the fakes' scripted
extractor and judge answer every call, as the fake gateway serves them, and a test scripts only what it
is about — one report's extraction, the judge's batch. No HTTP: how a failure travels (status codes,
retries, what is retried) is tested against the HTTP fakes (test_failures.py, tests/test_gateway_wire.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from research_dispatch.config.settings import load_settings
from research_dispatch.core.errors import AuthenticationFailed, ErrorInResponse, GatewayError
from research_dispatch.synthesis import SynthesisResult, synthesize
from research_dispatch.synthesis.common.errors import SynthesisFailed
from tests.seam import Reply, ScriptedGateway, synthesis_model
from tests.synthesis.conftest import CYCLE, ledger, statuses

ALPHA = "*:synthesis:01-alpha"
EXTRACTION, ALIGNMENT = "claim_extraction", "claim_alignment"


def run(repo: Path, gateway: ScriptedGateway) -> SynthesisResult:
    return synthesize(repo, load_settings(repo), env={}, cycle=CYCLE, gateway=gateway)


def model(*steps: Reply | Exception, session: str | None = None) -> ScriptedGateway:
    """The scripted extractor and judge, with `steps` first for the calls of `session`."""
    gateway = ScriptedGateway(otherwise=synthesis_model)
    if steps:
        gateway.enqueue(*steps, session=session)  # type: ignore[arg-type]
    return gateway


def every_judge(answer: Reply | GatewayError) -> ScriptedGateway:
    """The scripted extractor, and every judge call (one per decision, in parallel) answered with `answer`."""
    return ScriptedGateway(otherwise=lambda sent: answer if sent.schema == ALIGNMENT else synthesis_model(sent))


def test_invalid_output_is_repaired_once_with_the_error_fed_back(planted: Path) -> None:
    gateway = model(Reply(content=""), session=ALPHA)
    result = run(planted, gateway)
    calls = gateway.calls_for(ALPHA, EXTRACTION)
    assert len(calls) == 2 and result.extraction_calls == 7
    repair = calls[1].messages
    assert repair[-1]["role"] == "user" and "not valid JSON" in repair[-1]["content"]
    assert statuses(ledger(planted))["rl-algorithm/grpo"] == "convergent"
    alpha = next(r for r in ledger(planted)["reports"] if r["stem"] == "01-alpha")
    assert alpha["extraction"]["status"] == "ok" and len(alpha["extraction"]["calls"]) == 2
    log = (planted / "framework" / "synthesis.calls.jsonl").read_text().splitlines()
    assert sum('"subject":"research/01-alpha.md"' in line for line in log) == 2


def test_output_invalid_twice_is_reported_not_dropped(planted: Path) -> None:
    cut = Reply(content='{"claims": [{"statement": "GRPO is', finish_reason="length")
    result = run(planted, model(cut, cut, session=ALPHA))
    data = ledger(planted)
    alpha = next(r for r in data["reports"] if r["stem"] == "01-alpha")
    assert alpha["extraction"]["status"] == "failed" and "invalid structured output" in alpha["extraction"]["error"]
    assert "cut off by the token limit" in alpha["extraction"]["error"]
    assert alpha["claims"] == [] and len(alpha["extraction"]["calls"]) == 2
    assert any(item.startswith("Report 01-alpha could not be extracted") for item in data["limitations"])
    assert any("01-alpha" in w and "invalid structured output" in w for w in result.warnings)
    assert statuses(data)["rl-algorithm/grpo"] == "single_source"  # its support is honestly lower
    text = result.document_path.read_text(encoding="utf-8")
    assert "Report 01-alpha could not be extracted" in text and "extraction failed" in text
    # a failure is not cached: the next run tries again
    again = run(planted, model())
    assert again.extraction_calls == 1 and statuses(ledger(planted))["rl-algorithm/grpo"] == "convergent"


def test_every_extraction_failing_raises_synthesis_failed_and_writes_nothing(planted: Path) -> None:
    refused = AuthenticationFailed("gateway HTTP 401: User not found.", status=401)
    gateway = model(*[refused] * 6, session="*:synthesis:0*")
    with pytest.raises(SynthesisFailed, match="every extraction failed"):
        run(planted, gateway)
    assert len(gateway.sent) == 6 and not (planted / "framework").exists()


def test_a_failed_judge_leaves_claims_unaligned_and_says_so(planted: Path) -> None:
    gateway = every_judge(ErrorInResponse("gateway HTTP 400: Invalid request", status=400))
    result = run(planted, gateway)
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
    assert result.judge_calls == 0  # calls are counted by their CallRecords; a failed call has none
    assert len(gateway.calls_for("*", ALIGNMENT)) == 4  # one per batch: a gateway failure is not "repaired"


def test_a_judge_answer_naming_unknown_claims_is_repaired_then_failed(planted: Path) -> None:
    """The judge's answer is validated against the batch's claim ids: an unknown id is invalid output."""
    invented = Reply(content=json.dumps({"groups": [{"label": "invented", "relation": "agree", "positions": [
        {"claims": ["C1", "C999"], "summary": "a claim the batch does not have"}]}]}))
    gateway = every_judge(invented)
    run(planted, gateway)
    batches = ledger(planted)["batches"]
    assert batches and all(b["status"] == "failed" for b in batches)
    assert len(gateway.calls_for("*", ALIGNMENT)) == 2 * len(batches)  # each asked, then asked to repair once
    [repair] = [c.last for c in gateway.calls_for(f"*:synthesis:{batches[0]['id']}", ALIGNMENT)[1:]]
    assert repair["role"] == "user" and repair["content"].startswith("Your answer was rejected:")
    assert "unknown claim id 'C999'" in repair["content"]
