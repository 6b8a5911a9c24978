"""The synthesis' time limit at the model seam: the stage ends on time and names what it did not do.

`synthesize` runs in-process over a scripted model (`tests/seam.py`): the fakes' scripted extractor and
judge answer every call, and one call `Hang`s — it does not answer until the test releases it, after the
synthesis has returned, so a stage that waited for it could not pass. What the user reads is asserted as
the CLI prints it (`summary_line`, and one `warning:` line per warning). The time limit with nothing
extracted (exit 1) is a CLI case in test_synthesis_faults.py.
"""
# ruff: noqa: F811 - the imported fixture is the tests' argument

from __future__ import annotations

import fnmatch
import json
from pathlib import Path

import pytest

from research_dispatch.config.settings import load_settings
from research_dispatch.core.errors import GatewayError
from research_dispatch.synthesis import SynthesisResult, synthesize
from research_dispatch.synthesis.command import summary_line
from research_dispatch.synthesis.write.ledger import Ledger
from tests.seam import Hang, Reply, ScriptedGateway, Sent, synthesis_model
from tests.synthesis.conftest import CYCLE, planted, write_pyproject  # noqa: F401

pytestmark = pytest.mark.slow

reliability = pytest.mark.reliability


def run(repo: Path, gateway: ScriptedGateway) -> SynthesisResult:
    return synthesize(repo, load_settings(repo), env={}, cycle=CYCLE, gateway=gateway)


def valid_ledger(repo: Path) -> dict:  # type: ignore[type-arg]
    data = json.loads((repo / "framework" / "claims.json").read_text(encoding="utf-8"))
    Ledger.model_validate(data)
    return data  # type: ignore[no-any-return]


def hanging(schema: str, session: str = "*") -> tuple[ScriptedGateway, Hang]:
    """The scripted extractor and judge, except that every call of `schema` in `session` hangs."""
    hang = Hang()

    def answer(sent: Sent) -> Reply | GatewayError:
        if sent.schema == schema and fnmatch.fnmatchcase(sent.session_id or "", session):
            return hang(sent)
        return synthesis_model(sent)

    return ScriptedGateway(otherwise=answer), hang


@reliability(area="budget", case="synthesis time limit reached while a report is being extracted",
             expect="synthesize ends at synthesis.timeout_minutes (3 s here) without waiting for the hung call; "
                    "a degraded synthesis whose banner, limitations, ledger `incomplete` and warnings name the "
                    "report not extracted; no partial file; the next run replays what was done and does the rest")
def test_the_time_limit_ends_the_synthesis_and_names_what_was_not_done(planted: Path) -> None:
    write_pyproject(planted, ", timeout_minutes = 0.05")
    gateway, hang = hanging("claim_extraction", "*:synthesis:02-beta")
    result = run(planted, gateway)
    assert hang.started.is_set() and not hang.answered.is_set()  # it returned while the call still hung
    hang.release.set()
    assert "INCOMPLETE: the time limit was reached" in summary_line(result)
    data = valid_ledger(planted)
    # the deadline passed during extraction: citation checks and judging never started
    unchecked, extracted, judged = data["incomplete"]
    assert "02-beta" in extracted and "0.05 min" in extracted
    assert "judge batch(es) judge-" in judged  # named by their claims (a hash), never by a number
    assert "citations of these reports were all checked" in unchecked and "01-alpha" in unchecked
    beta = next(r for r in data["reports"] if r["stem"] == "02-beta")
    assert beta["extraction"]["status"] == "timed_out" and beta["claims"] == []
    document = (planted / "framework" / "planted.md").read_text(encoding="utf-8")
    assert "> **Incomplete synthesis.**" in document and "02-beta" in document.split("## TL;DR", 1)[0]
    assert any("synthesis time limit" in warning for warning in result.warnings)
    assert not list((planted / "framework").glob(".*.tmp"))
    # the next run replays what was done and finishes the rest
    write_pyproject(planted)
    again = run(planted, ScriptedGateway(otherwise=synthesis_model))
    assert "(1 extraction, 5 cached" in summary_line(again) and valid_ledger(planted)["incomplete"] == []


@reliability(area="budget", case="synthesis time limit reached while a judge batch is running",
             expect="the batch is recorded as timed_out, its claims are left unaligned and the banner and "
                    "limitations say so")
def test_the_time_limit_during_judging_is_named(planted: Path) -> None:
    write_pyproject(planted, ", timeout_minutes = 0.05")
    gateway, hang = hanging("claim_alignment")
    result = run(planted, gateway)
    assert hang.started.is_set() and not hang.answered.is_set()
    hang.release.set()
    assert "INCOMPLETE: the time limit was reached" in summary_line(result)
    data = valid_ledger(planted)
    assert data["batches"] and all(b["status"] == "timed_out" and b["judgement"] is None for b in data["batches"])
    for batch in data["batches"]:
        assert any(batch["id"] in item and "judge batch(es)" in item for item in data["incomplete"])
    assert data["divergences"] == []  # nobody confirmed a divergence
