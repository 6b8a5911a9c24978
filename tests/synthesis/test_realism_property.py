"""The property of issue 29 (point 6): for any set of reports and any slip of the fakes' `realism` setting —
copy slips, pointers off by one, swapped positions, aliases for a pick, a malformed claim among good ones, a
judge's copy slips and pointers off by one — the counted (family, pick, position) set equals the one with
perfect answers. At the model seam (`tests/seam.py`): the real `synthesize` over the fakes' scripted extractor
and judges, in process.

A pick is known by the planted statement its claim's report sentence carries (`corpus/claims.json`), never by
the name the extractor gave it: an alias is the same pick (merging aliases into one row of the table is point 3,
in align/); a claim without a planted statement by its report and units."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from research_dispatch.config.settings import load_settings
from research_dispatch.synthesis import synthesize
from research_dispatch_fakes.script_synthesis import bank
from tests.profiles import examples
from tests.seam import ScriptedGateway, realistic_model, synthesis_model
from tests.synthesis.conftest import CYCLE, PLANTED, SOURCES, write_evidence, write_pyproject, write_report

pytestmark = pytest.mark.slow

_PLANTED = [(" ".join(v["statement"].lower().split()), str(e["id"])) for e in bank() for v in e["by_topic"].values()]


def _pick(claim: dict[str, Any]) -> str:
    quote = " ".join(str(claim["quote"]).lower().split())
    return next((bank_id for text, bank_id in _PLANTED if text in quote), f"{claim['report']}:{claim['units']}")


def counted(stems: tuple[str, ...], responder: Any) -> frozenset[tuple[str, str, str]]:
    """The counted (family, pick, position) set of a synthesis of these planted reports."""
    with tempfile.TemporaryDirectory(prefix="realism-") as tmp:
        repo = Path(tmp)
        write_pyproject(repo)
        for stem in stems:
            model, sentences, route = PLANTED[stem]
            write_report(repo, stem, model, sentences, route=route)
            # each cited page says its sentence between two others, so a judge's pointer can be one off
            write_evidence(repo, stem, [(SOURCES[i % len(SOURCES)][0], f"The page opens with some context. "
                                         f"{sentence}. Further details follow in the next section.")
                                        for i, sentence in enumerate(sentences)])
        ledger = synthesize(repo, load_settings(repo), env={}, cycle=CYCLE,
                            gateway=ScriptedGateway(otherwise=responder)).ledger
    family = {r["stem"]: r["family"] for r in ledger["reports"]}
    return frozenset((family[c["report"]], _pick(c), c["position"]) for c in ledger["claims"]
                     if c["standing"] == "counted")


_PERFECT: dict[tuple[str, ...], frozenset[tuple[str, str, str]]] = {}


@settings(max_examples=examples(12), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stems=st.lists(st.sampled_from(sorted(PLANTED)), min_size=2, max_size=len(PLANTED), unique=True),
       rate=st.sampled_from([0.3, 0.6, 1.0]), seed=st.integers(0, 2**31))
def test_no_slip_of_a_real_model_changes_what_is_counted(stems: list[str], rate: float, seed: int) -> None:
    chosen = tuple(sorted(stems))
    if chosen not in _PERFECT:
        _PERFECT[chosen] = counted(chosen, synthesis_model)
    assert _PERFECT[chosen]  # the planted reports do count something
    assert counted(chosen, realistic_model(rate, seed)) == _PERFECT[chosen]
