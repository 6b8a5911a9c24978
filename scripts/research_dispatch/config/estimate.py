"""What a plan may cost: the worst case its caps allow, and an estimate from a pinned price list.

Why both: the caps are the promise (a leg stops at its `max_cost_usd`; no new leg starts past the run's
`run_budget_usd`), so the worst case is exact: the sum of the legs' dollar caps, bounded by the run
budget. What a leg usually costs is an estimate, and says on what it rests:

* prices: the `genai-prices` package (pydantic's, pinned in pyproject.toml), its bundled snapshot of
  OpenRouter's listed prices — never fetched at run time, so a plan is offline and reproducible;
* tokens: a long leg as `scripts/dev/bench.py` measures one (docs/PERFORMANCE.md, figure 4a: a 30-step
  reading leg sends ~150k prompt tokens; a report is ~4.5k completion tokens, figure 7) with room for
  tool calls and some reasoning. Models that reason at length, or legs that search more, cost more —
  up to the cap. Provider prompt caching (cheaper prompt tokens) is not counted: the estimate errs high;
* the synthesis: one extraction call per report and one judge call per batch of claims, at the
  extractor's and the first judge's prices.

A model the price list does not know is left out of the estimate, and named (its cap still bounds it).
"""

from __future__ import annotations

import difflib
import json
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from research_dispatch.config.plan import Leg, matrix
from research_dispatch.config.settings import Settings
from research_dispatch.config.topics import effective
from research_dispatch.config.uses import model_uses
from research_dispatch.core.errors import Problem
from research_dispatch.core.tables import Column, render_table

LEG_PROMPT_TOKENS = 150_000
"""Prompt tokens of a long leg (bench figure 4a, 30 steps: 150,655)."""
LEG_COMPLETION_TOKENS = 12_000
"""Completion tokens of a leg: the report (~4.5k, figure 7), tool calls, revisions and some reasoning."""
EXTRACTION_PROMPT_TOKENS = 8_000  # one report (~2,500 words) and the extraction instructions
EXTRACTION_COMPLETION_TOKENS = 3_000  # the claims as structured output
JUDGE_PROMPT_TOKENS = 12_000  # a batch of claims (synthesis.batch_size) with their quotes
JUDGE_COMPLETION_TOKENS = 3_000
CLAIMS_PER_REPORT = 20  # what the extractor keeps from a report, about; decides the judge batches
PRICE_SOURCE = "genai-prices"
SUGGESTIONS = 3
NEAR_SLUG = 0.75
"""How alike a listed id must be to an unlisted slug to be suggested (difflib's ratio)."""
WIDTH = 80  # the narrowest terminal the lines are written for


@dataclass(frozen=True)
class LegCost:
    """One leg: its dollar cap and, when the price list knows its model, an estimate."""

    leg: Leg
    cap_usd: float
    estimate_usd: float | None


@dataclass(frozen=True)
class PlanCost:
    legs: tuple[LegCost, ...]
    caps_usd: float  # the sum of the legs' caps
    run_budget_usd: float
    synthesis_usd: float  # the priced part of the synthesis (extraction, judging)
    synthesis_unpriced: tuple[str, ...]  # synthesis models the price list does not know
    prices: str  # where the prices come from, e.g. "genai-prices 0.2.3", or why there are none

    @property
    def worst_case_usd(self) -> float:
        """What the legs can spend at most: their caps, bounded by the run budget."""
        return min(self.caps_usd, self.run_budget_usd)

    @property
    def estimate_usd(self) -> float:
        """The priced part: legs whose model has a price, and the synthesis's priced calls."""
        return sum(c.estimate_usd for c in self.legs if c.estimate_usd is not None) + self.synthesis_usd

    @property
    def unpriced(self) -> list[str]:
        """Models (of legs or the synthesis) left out of the estimate: not in the price list."""
        return sorted({c.leg.route.model for c in self.legs if c.estimate_usd is None} | set(self.synthesis_unpriced))


def _price_list() -> tuple[Any | None, str]:
    """The genai-prices module and its version, or None and why not (it needs Python 3.11+)."""
    try:
        # lazy: an optional dependency (Python 3.11+ only), and a 1.6 MB data module `plan` needs on a terminal only
        import genai_prices
    except ImportError:
        return None, "no price list (genai-prices is not installed: it needs Python 3.11 or newer)"
    return genai_prices, f"{PRICE_SOURCE} {genai_prices.__version__}"


def price_usd(model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
    """The listed OpenRouter price of that many tokens on `model`, or None when it is not listed."""
    prices, _ = _price_list()
    if prices is None:
        return None
    try:
        result = prices.calc_price(prices.Usage(input_tokens=prompt_tokens, output_tokens=completion_tokens),
                                   model_ref=model.split(":", 1)[0], provider_id="openrouter")
    except LookupError:
        return None
    total = result.total_price
    return float(total) if isinstance(total, Decimal | int | float) else None


def listed_models() -> list[str]:
    """The OpenRouter model ids the price list holds (`author/name`, without `:variant` suffixes); empty
    without a price list."""
    prices, _ = _price_list()
    if prices is None:
        return []
    # lazy: the same optional 1.6 MB data module as `_price_list`
    from genai_prices import data

    providers = [p for p in data.providers if p.id == "openrouter"]
    return sorted({model.id.split(":", 1)[0] for provider in providers for model in provider.models
                   if "/" in model.id and not model.id.startswith("~")})


def unlisted_models(settings: Settings, legs: Sequence[Leg]) -> list[Problem]:
    """Warnings for models the bundled price list does not know, with the nearest listed ids (`openai/gpt5`
    → `openai/gpt-5`): offline, before any key is needed. Not problems: a model newer than the list's
    snapshot is not listed yet, and `check --online` asks the gateway itself (`gateway/catalogue.py`)."""
    _, source = _price_list()
    ids = listed_models()
    if not ids:
        return []
    warnings: list[Problem] = []
    seen: set[tuple[str, str]] = set()
    for use in model_uses(settings, legs):
        base = use.model.split(":", 1)[0]
        if (use.path, use.field) in seen or price_usd(use.model, 1, 1) is not None or any(
                listed.startswith((base + "-", base + ".")) for listed in ids):
            continue  # listed, or the base name of listed variants (`x-ai/grok-4` of `x-ai/grok-4.5`, `-fast`)
        seen.add((use.path, use.field))
        near = difflib.get_close_matches(base, ids, n=SUGGESTIONS, cutoff=NEAR_SLUG)
        hint = f"did you mean {' or '.join(near)}? " if near else ""
        warnings.append(Problem(use.path, use.field, f"{use.model} is not in the bundled price list ({source}); "
                                f"{hint}(not an error: the list may lack a model, a new one above all; "
                                "`check --online` asks the gateway)"))
    return warnings


def estimate_plan(settings: Settings, legs: Sequence[Leg]) -> PlanCost:
    costs: list[LegCost] = []
    for leg in legs:
        _, budget, _ = effective(leg.topic, settings)
        estimate = price_usd(leg.route.model, LEG_PROMPT_TOKENS, LEG_COMPLETION_TOKENS)
        capped = None if estimate is None else min(estimate, budget.max_cost_usd)
        costs.append(LegCost(leg, budget.max_cost_usd, capped))
    reports = len(legs)
    batches = max(1, -(-reports * CLAIMS_PER_REPORT // settings.synthesis.batch_size))
    calls = [(settings.synthesis.extractor_model, reports, EXTRACTION_PROMPT_TOKENS, EXTRACTION_COMPLETION_TOKENS)]
    if settings.synthesis.judge_models:  # the judge of a batch is one of these; the first stands for them
        calls.append((settings.synthesis.judge_models[0], batches, JUDGE_PROMPT_TOKENS, JUDGE_COMPLETION_TOKENS))
    synthesis = 0.0
    unpriced: list[str] = []
    for model, count, prompt, completion in calls:
        price = price_usd(model, prompt, completion)
        if price is None:
            unpriced.append(model)
        else:
            synthesis += count * price
    _, source = _price_list()
    return PlanCost(tuple(costs), sum(c.cap_usd for c in costs), settings.run_budget_usd, synthesis,
                    tuple(unpriced), source)


PLAN_COLUMNS = (Column("leg", ident=True), Column("model", cut_last=True), Column("family"),
                Column("steps", right=True), Column("cap $", right=True), Column("min", right=True),
                Column("est. $", right=True))


def plan_lines(settings: Settings, legs: Sequence[Leg], cycle: str) -> list[str]:
    """`plan` on a terminal: the legs with their caps, where their reports go, the worst case and the
    estimate (the report path is the leg's id under `research_dir`: said once, not in every row)."""
    cost = estimate_plan(settings, legs)
    rows = []
    for item in cost.legs:
        leg = item.leg
        _, budget, _ = effective(leg.topic, settings)
        rows.append((leg.stem, leg.route.model + (f" via {leg.route.provider}" if leg.route.provider else ""),
                     leg.family, str(budget.max_steps), f"{budget.max_cost_usd:.2f}", f"{budget.timeout_minutes:g}",
                     "—" if item.estimate_usd is None else f"{item.estimate_usd:.2f}"))
    topics = len({leg.topic.id for leg in legs})
    families = len({leg.family for leg in legs})
    priced = sum(c.estimate_usd for c in cost.legs if c.estimate_usd is not None)
    lines = [f"plan: {len(legs)} leg(s) from {topics} topic(s), {families} model "
             f"famil{'y' if families == 1 else 'ies'}, cycle {cycle}", *render_table(PLAN_COLUMNS, rows),
             f"  each leg writes {settings.research_dir}/<leg>.md (and its call log and evidence beside it)",
             f"worst case: ${cost.worst_case_usd:.2f} for the legs: their dollar caps (${cost.caps_usd:.2f}),",
             f"  bounded by run_budget_usd (${cost.run_budget_usd:.2f})",
             f"estimate: ~${cost.estimate_usd:.2f}: legs ${priced:.2f}, synthesis ${cost.synthesis_usd:.2f},",
             *textwrap.wrap(f"at the OpenRouter prices of {cost.prices}", WIDTH, initial_indent="  ",
                            subsequent_indent="  "),
             f"  (a long leg: ~{LEG_PROMPT_TOKENS // 1000}k prompt, ~{LEG_COMPLETION_TOKENS // 1000}k completion "
             "tokens; prompt caching not counted)"]
    if cost.unpriced:  # every model when there is no price list (Python 3.10): wrapped for an 80-column terminal
        lines += textwrap.wrap(f"not in the price list, so not estimated: {', '.join(cost.unpriced)}", WIDTH,
                               initial_indent="  ", subsequent_indent="    ", break_on_hyphens=False)
    lines.append("piped, or with --json: the matrix JSON for GitHub Actions, and both figures")
    return lines


def plan_document(settings: Settings, legs: Sequence[Leg]) -> str:
    """`plan` piped or with `--json`: the matrix (`include`, unchanged for its consumers) and beside it what
    the plan may cost — `worst_case_usd` (the caps, bounded by the run budget) and `estimate_usd` (the
    priced part; null when nothing of the legs is priced, e.g. without the price list), with the models
    left out of the estimate in `unpriced_models`. The workflow's `matrix=` output stays the matrix alone:
    every other top-level key of a matrix would be a dimension to GitHub Actions."""
    cost = estimate_plan(settings, legs)
    priced = any(c.estimate_usd is not None for c in cost.legs)
    document = {**matrix(list(legs)), "worst_case_usd": round(cost.worst_case_usd, 2),
                "estimate_usd": round(cost.estimate_usd, 2) if priced else None,
                "unpriced_models": cost.unpriced}
    return json.dumps(document, separators=(",", ":"), sort_keys=True)


def plan_markdown(settings: Settings, legs: Sequence[Leg], cycle: str) -> str:
    """The plan for the job summary (the dry run's answer to "what would this cost"): `plan_lines` as a
    fixed-width block under a heading that says the worst case and the estimate."""
    cost = estimate_plan(settings, legs)
    body = "\n".join(line for line in plan_lines(settings, legs, cycle) if not line.startswith("piped"))
    return (f"## Plan: {len(legs)} leg(s), worst case ${cost.worst_case_usd:.2f}, estimate ~${cost.estimate_usd:.2f}"
            f"\n\n```text\n{body}\n```\n")
