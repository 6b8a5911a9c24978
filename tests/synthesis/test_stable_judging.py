"""Stable judging (issue 23, point 5), as a user runs it: each decision is judged on its own claims, so
reports about something else leave every other decision byte-identical in `framework/claims.json` and
asks the judge nothing again."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.synthesis.conftest import (
    claim_json,
    ledger,
    scripted_extraction,
    structured_calls,
    synthesize_cli,
    write_report,
)

pytestmark = pytest.mark.slow

UNRELATED = [
    claim_json("OpenTelemetry is the tracing backend to adopt for the RL cluster", "observability",
               stance="recommend", decision="tracing backend", pick="OpenTelemetry"),
    claim_json("Span sampling at one percent keeps tracing overhead under two milliseconds per step", "observability",
               confidence="high"),
]


def objects(data: dict[str, Any], name: str) -> dict[str, str]:
    """`data[name]` as key → canonical JSON text of the object."""
    field = "stem" if name == "reports" else "id" if name == "batches" else "key"
    return {item[field]: json.dumps(item, sort_keys=True, ensure_ascii=False) for item in data[name]}


def test_an_unrelated_report_leaves_every_other_decision_byte_identical(planted: Path, gateway,
                                                                         synth_env) -> None:
    first = synthesize_cli(planted, synth_env)
    assert first.code == 0, first.stderr
    before = ledger(planted)
    for stem, model in (("07-zeta", "x-ai/grok-4"), ("08-eta", "mistralai/mistral-large")):
        write_report(planted, stem, model, [claim["quote"] for claim in UNRELATED])
    gateway.reset()
    gateway.set_scenario({"rules": [scripted_extraction(stem, UNRELATED) for stem in ("07-zeta", "08-eta")]})
    second = synthesize_cli(planted, synth_env)
    assert second.code == 0, second.stderr
    after = ledger(planted)
    for name in ("claims", "clusters", "divergences", "batches", "reports"):
        old, new = objects(before, name), objects(after, name)
        assert old.items() <= new.items(), name  # every object of the first run, byte for byte
        added = new.keys() - old.keys()
        assert all("07-zeta" in new[key] or "08-eta" in new[key] for key in added), name  # the new reports'
    # only the new reports were extracted, and only their own decisions were put to a judge
    assert ("LLM calls: 6 (2 extraction, 6 cached; 2 citation check, 12 citations cached; 2 judge, 4 cached)"
            in second.stdout)
    for call in structured_calls(gateway, "claim_alignment"):
        asked = json.dumps(call["request"]["messages"])
        assert "observability" in asked and "GRPO" not in asked and "Monarch" not in asked
