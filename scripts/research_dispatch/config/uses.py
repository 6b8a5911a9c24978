"""Every place the configuration names a model, and what the calls made there need.

Why one list: a model is named in the topic files (one researcher per route) and in pyproject.toml (the
synthesis's extractor, judges and citation checkers), and each check of "does this model exist" — the
bundled price list offline (`check`, `config/estimate.py`), the gateway's own listing online
(`check --online`, `run`, `gateway/catalogue.py`) — must see every one of them and name the file and the
field where it is written. What a call needs is what `Gateway._request` marks required under
`require_parameters`: `tools` for a researcher, a `json_schema` response format for the synthesis.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from research_dispatch.config.plan import SYNTHESIS_TABLE, Leg
from research_dispatch.config.settings import CONFIG_FILE, Settings

RESEARCH_NEEDS = frozenset({"tools"})
"""What a researcher's calls need an endpoint to list."""
STRUCTURED_NEEDS = frozenset({"response_format", "structured_outputs"})
"""What the extractor's and judges' `json_schema` calls need an endpoint to list."""


@dataclass(frozen=True)
class ModelUse:
    """One place the configuration names a model, and what the calls made there need."""

    model: str
    provider: str | None
    needs: frozenset[str]
    path: str  # the file that names it (a topic file, pyproject.toml)
    field: str  # the field in that file
    purpose: str  # for people: "the researcher of diloco-family", "the synthesis's extractor"


def model_uses(settings: Settings, legs: Iterable[Leg]) -> list[ModelUse]:
    """Every model the plan's legs and the synthesis name, with what their calls need."""
    uses: list[ModelUse] = []
    for leg in legs:
        index = next((i for i, route in enumerate(leg.topic.models) if route == leg.route), 0)
        uses.append(ModelUse(leg.route.model, leg.route.provider, RESEARCH_NEEDS, leg.topic_file.relpath,
                             f"models[{index}].model", f"the researcher of {leg.topic.id}"))
    syn = settings.synthesis
    uses.append(ModelUse(syn.extractor_model, None, STRUCTURED_NEEDS, CONFIG_FILE,
                         f"{SYNTHESIS_TABLE}.extractor_model", "the synthesis's extractor"))
    for index, judge in enumerate(syn.judge_models):
        uses.append(ModelUse(judge, None, STRUCTURED_NEEDS, CONFIG_FILE, f"{SYNTHESIS_TABLE}.judge_models[{index}]",
                             "a synthesis judge"))
    for index, checker in enumerate(syn.citation_models):
        uses.append(ModelUse(checker, None, STRUCTURED_NEEDS, CONFIG_FILE,
                             f"{SYNTHESIS_TABLE}.citation_models[{index}]", "a synthesis citation checker"))
    return uses
