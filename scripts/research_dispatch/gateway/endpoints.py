"""What OpenRouter's endpoints listing says about a model: parameters each endpoint accepts, and prices.

Why it matters (OpenRouter's provider-selection docs; docs/REAL-SERVICES.md): requests pin the route with
`provider.require_parameters: true`, and OpenRouter then routes only to endpoints whose
`supported_parameters` list EVERY parameter the request carries. `max_tokens` and `max_completion_tokens`
are different entries; DeepSeek's endpoints list only `max_tokens`, so a request with
`max_completion_tokens` finds no endpoint at all (404 "No endpoints found that can handle the requested
parameters"). The request is therefore shaped from the listing of `GET /models/{author}/{slug}/endpoints`
(`data.endpoints[]`): it carries only parameters the candidate endpoints list, and its output cap under the
name they list.

Prices (`PublicEndpoint.pricing`): `prompt`/`completion` (USD per token, strings) hold under default
conditions; `pricing.overrides[]` entries raise (or lower) them when their conditions hold —
`min_prompt_tokens` (the prompt has strictly more tokens), or a daily UTC window `utc_start`/`utc_end`.
Later entries win per price key. A pre-call cost bound must use the price that applies, so `Pricing.at`
gives it for a prompt size; a time window counts whenever it would raise the price (never under-price).

Pure functions over parsed JSON; the gateway fetches and caches the listing.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from research_dispatch.core.errors import UnsupportedParameters

OUTPUT_CAPS = ("max_completion_tokens", "max_tokens")
"""The two names of the output cap; an endpoint may list either, both or neither."""

FALLBACK_OUTPUT_CAP = "max_tokens"
"""The cap's name when no listing is available: the one nearly every endpoint lists."""


@dataclass(frozen=True)
class PriceOverride:
    """One `pricing.overrides[]` entry: prices (USD per token) that apply when its conditions hold."""

    prompt: float | None = None
    completion: float | None = None
    min_prompt_tokens: float | None = None
    timed: bool = False  # has a `utc_start`/`utc_end` window

    def applies(self, prompt_tokens: int) -> bool:
        return self.min_prompt_tokens is None or prompt_tokens > self.min_prompt_tokens


@dataclass(frozen=True)
class EndpointPrice:
    """The price schedule of one endpoint. `cache_write` (`input_cache_write`): what a prompt token written
    to the provider's cache costs — above the input price on Anthropic's (1.25x)."""

    prompt: float
    completion: float
    overrides: tuple[PriceOverride, ...] = ()
    cache_write: float | None = None

    def at(self, prompt_tokens: int) -> tuple[float, float]:
        """(prompt, completion) USD per token for a prompt of this many tokens: the dearer of the
        schedule with and without its time-windowed entries, so the bound holds at any hour; a prompt
        token at the dearer of input and cache write (a breakpoint may make every one a write)."""

        with_timed, without = self._resolve(prompt_tokens, True), self._resolve(prompt_tokens, False)
        prompt = max(with_timed[0], without[0])
        if self.cache_write is not None and self.prompt > 0:  # the write premium scales with the input price
            prompt *= max(1.0, self.cache_write / self.prompt)
        return prompt, max(with_timed[1], without[1])

    def least(self, prompt_tokens: int) -> tuple[float, float]:
        """(prompt, completion) USD per token at the cheapest this schedule lists for a prompt this long:
        the cheaper of the schedule with and without its time-windowed entries, no cache-write premium.
        A bound from below, for telling a reported cost that cannot be right (`least_cost`)."""
        with_timed, without = self._resolve(prompt_tokens, True), self._resolve(prompt_tokens, False)
        return min(with_timed[0], without[0]), min(with_timed[1], without[1])

    def _resolve(self, prompt_tokens: int, include_timed: bool) -> tuple[float, float]:
        prompt, completion = self.prompt, self.completion
        for entry in self.overrides:  # later entries win per price key
            if (entry.timed and not include_timed) or not entry.applies(prompt_tokens):
                continue
            prompt = entry.prompt if entry.prompt is not None else prompt
            completion = entry.completion if entry.completion is not None else completion
        return prompt, completion


@dataclass(frozen=True)
class Pricing:
    """USD per token for prompt and completion under default conditions (the dearest candidate
    endpoint), with every candidate's schedule so that `at(prompt_tokens)` prices a long prompt right."""

    prompt: float
    completion: float
    schedules: tuple[EndpointPrice, ...] = field(default=(), compare=False)

    def at(self, prompt_tokens: int) -> Pricing:
        """The prices that apply to a prompt of `prompt_tokens` tokens (overrides included)."""
        if not self.schedules:
            return self
        prices = [schedule.at(prompt_tokens) for schedule in self.schedules]
        return Pricing(prompt=max(p for p, _ in prices), completion=max(c for _, c in prices),
                       schedules=self.schedules)


@dataclass(frozen=True)
class Endpoint:
    """One entry of `data.endpoints[]`."""

    provider_name: str
    tag: str
    supported_parameters: frozenset[str]
    price: EndpointPrice | None
    context_length: int | None = None  # tokens of prompt and output together (`context_length`)

    @property
    def base_tag(self) -> str:
        return self.tag.split("/", 1)[0]


@dataclass(frozen=True)
class RequestShape:
    """Which optional parameters a request may carry, and under which name its output cap goes.
    `reasons`: every qualifying endpoint lists `reasoning` or `include_reasoning` (the model reasons, and
    `reasoning` in `optional` says it can be steered); False without a listing."""

    output_cap: str | None
    optional: frozenset[str]
    reasons: bool = False


def _price(value: Any) -> float | None:
    """A listed price (a decimal string, or a number), or None when it is absent or not a price."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) and number >= 0 else None


def _threshold(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def parse_price(raw: Any) -> EndpointPrice | None:
    """An endpoint's `pricing` object as a schedule; None when it publishes no usable prices."""
    if not isinstance(raw, Mapping):
        return None
    prompt, completion = _price(raw.get("prompt")), _price(raw.get("completion"))
    if prompt is None or completion is None or completion <= 0:
        return None
    overrides: list[PriceOverride] = []
    for entry in raw.get("overrides") or []:
        if not isinstance(entry, Mapping):
            continue
        overrides.append(PriceOverride(
            prompt=_price(entry.get("prompt")), completion=_price(entry.get("completion")),
            min_prompt_tokens=_threshold(entry.get("min_prompt_tokens")),
            timed=entry.get("utc_start") is not None or entry.get("utc_end") is not None))
    return EndpointPrice(prompt=prompt, completion=completion, overrides=tuple(overrides),
                         cache_write=_price(raw.get("input_cache_write")))


def _context(value: Any) -> int | None:
    """A listed context length (a positive whole number of tokens), or None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 1:
        return None
    return int(value)


def context_of(endpoints: Iterable[Endpoint]) -> int | None:
    """The smallest context window among the endpoints that list one (a request must fit every candidate);
    None when none lists it."""
    lengths = [e.context_length for e in endpoints if e.context_length is not None]
    return min(lengths) if lengths else None


def parse_endpoints(payload: Any) -> list[Endpoint]:
    """`{"data": {"endpoints": [...]}}` as typed endpoints; malformed entries are skipped."""
    data = payload.get("data") if isinstance(payload, Mapping) else None
    listed = data.get("endpoints") if isinstance(data, Mapping) else None
    endpoints: list[Endpoint] = []
    for entry in listed if isinstance(listed, list) else []:
        if not isinstance(entry, Mapping):
            continue
        params = entry.get("supported_parameters")
        endpoints.append(Endpoint(
            provider_name=str(entry.get("provider_name") or ""), tag=str(entry.get("tag") or ""),
            supported_parameters=frozenset(str(p) for p in params) if isinstance(params, list) else frozenset(),
            price=parse_price(entry.get("pricing")), context_length=_context(entry.get("context_length"))))
    return endpoints


def candidates(endpoints: Iterable[Endpoint], provider_slug: str | None) -> list[Endpoint]:
    """The endpoints a pinned request may land on: those of the pinned provider (by base slug, as
    OpenRouter matches `provider.order`), or all of them when nothing is pinned."""
    listed = list(endpoints)
    if not provider_slug:
        return listed
    base = provider_slug.split("/", 1)[0]
    if "/" in provider_slug:  # a full endpoint slug matches that endpoint only
        return [e for e in listed if e.tag == provider_slug]
    return [e for e in listed if e.base_tag == base]


def request_shape(endpoints: list[Endpoint], *, required: frozenset[str], wanted: frozenset[str],
                  model: str) -> RequestShape:
    """The parameters a `require_parameters` request may carry so that some candidate endpoint takes it.

    `required` must all be listed by one endpoint (else `UnsupportedParameters`, before any money is
    spent); an optional parameter in `wanted` is sent only when every qualifying endpoint lists it (the
    route keeps all of them); the output cap takes the name every qualifying endpoint lists, else the
    name most of them list (`max_tokens` on a tie), else it is left out. With no listing at all the
    request carries what it wants and the cap as `max_tokens`.
    """
    if not endpoints:  # nothing known: `reasoning` could empty a require_parameters route, so it stays out
        return RequestShape(output_cap=FALLBACK_OUTPUT_CAP, optional=wanted - {"reasoning"})
    qualifying = [e for e in endpoints if required <= e.supported_parameters]
    if not qualifying:
        missing = sorted(required - frozenset().union(*(e.supported_parameters for e in endpoints)))
        lacking = ", ".join(missing) or ", ".join(sorted(required))
        raise UnsupportedParameters(
            f"no endpoint of {model} on this route lists {lacking} in its supported_parameters; "
            "the call needs it (choose another model or provider)", error_type="unsupported_parameters")
    optional = frozenset(p for p in wanted if all(p in e.supported_parameters for e in qualifying))
    counts = {cap: sum(cap in e.supported_parameters for e in qualifying) for cap in OUTPUT_CAPS}
    cap: str | None = next((name for name in OUTPUT_CAPS if counts[name] == len(qualifying)), None)
    if cap is None and max(counts.values()) > 0:
        cap = "max_tokens" if counts["max_tokens"] >= counts["max_completion_tokens"] else "max_completion_tokens"
    reasons = all(e.supported_parameters & {"reasoning", "include_reasoning"} for e in qualifying)
    return RequestShape(output_cap=cap, optional=optional, reasons=reasons)


def pricing_of(endpoints: Iterable[Endpoint]) -> Pricing | None:
    """The dearest default-condition prices among the endpoints, with their schedules; None if none."""
    schedules = tuple(e.price for e in endpoints if e.price is not None)
    if not schedules:
        return None
    return Pricing(prompt=max(s.prompt for s in schedules), completion=max(s.completion for s in schedules),
                   schedules=schedules)


def least_cost(endpoints: Iterable[Endpoint], *, prompt_tokens: int, cached_tokens: int,
               completion_tokens: int) -> float | None:
    """The least the listed prices allow for the tokens a call counted: its uncached prompt tokens and
    its completion tokens at the cheapest endpoint's least prices (cached prompt tokens at nothing), so a
    cost below it is a figure the gateway got wrong, never a discount the listing shows. None when no
    endpoint lists prices."""
    uncached = max(0, prompt_tokens - cached_tokens)
    costs = [uncached * prompt + completion_tokens * completion
             for prompt, completion in (e.price.least(prompt_tokens) for e in endpoints if e.price is not None)]
    return min(costs) if costs else None
