"""Route fidelity: did the model and provider we asked for actually answer?

Pure functions over the facts a gateway response carries. A verdict per call, then one per leg:

* `exact` — every call served by the requested model (a dated permaslug counts as the same model); with a
  pinned provider, by that provider with no recorded fallback attempt. Without a pin the route asked for is
  "this model, any provider" (docs/ARCHITECTURE.md § Route verdicts — FIXED): OpenRouter's own fallbacks
  among the model's providers are its normal load balancing (`allow_fallbacks` defaults to true; the router
  metadata then shows several attempts for one call), so they keep the call `exact` — the providers that
  served are still recorded, call by call and in the report's `served_providers`;
* `model_fallback` — any call served by another model;
* `provider_fallback` — a pinned provider, and the call was served by another one or after a recorded
  fallback attempt;
* `cached` — a response-cache hit (no provider was called, nothing to verify);
* `unverified` — the response lacked the metadata needed to decide;
* `self_reported` — an `openai-compatible` gateway (docs/ARCHITECTURE.md § Gateways — FIXED) said the requested model
  answered; it has no router metadata and no `/generation` record, so nothing can confirm it.

Only `exact` counts as verified, and `self_reported` when the configuration says
`trust_self_reported = true` (the user vouches for their own gateway).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

ABORTED = "aborted"
"""The verdict logged for an attempt given up on the way (a deadline, Ctrl-C, a retry): its cost counts, but
it served nothing the leg used, so it takes no part in the route verdict."""

# Best first: a leg takes the worst verdict of its calls.
VERDICTS = ("exact", "self_reported", "cached", "unverified", "provider_fallback", "model_fallback")
_SEVERITY = {verdict: rank for rank, verdict in enumerate(VERDICTS)}
_DATE_SUFFIX = re.compile(r"-(?:\d{8}|\d{4}-\d{2}-\d{2})$")


def canonical_model(slug: str) -> tuple[str, frozenset[str]]:
    """(author, name tokens) with any `:variant` and trailing date stamp removed.

    Name tokens are compared as a set so that OpenRouter's permaslug spelling
    (`anthropic/claude-4.5-sonnet-20250929` for `anthropic/claude-sonnet-4.5`) matches, while
    `gpt-5` and `gpt-5-mini` stay different models.
    """
    slug = slug.strip().lower().split(":", 1)[0]
    author, _, name = slug.partition("/")
    name = _DATE_SUFFIX.sub("", name)
    return author, frozenset(name.split("-"))


def same_model(requested: str, served: str | None) -> bool:
    if not served:
        return False
    return canonical_model(requested) == canonical_model(served)


def normalise_provider(name: str) -> str:
    """Case- and punctuation-insensitive provider key; endpoint slugs compare by their base part."""
    base = name.split("/", 1)[0]
    return re.sub(r"[^a-z0-9]", "", base.lower())


def same_provider(pinned: str, served: str | None, display_names: Iterable[str] = ()) -> bool:
    """Does the served provider (a display name) match the pinned slug?

    `display_names` are the names the gateway's endpoints listing gives for the pinned slug; when it is
    unavailable the comparison falls back to normalised names (`DeepSeek` ~ `deepseek`).
    """
    if not served:
        return False
    served_key = normalise_provider(served)
    candidates = {normalise_provider(pinned)} | {normalise_provider(n) for n in display_names}
    return served_key in candidates


def call_verdict(*, requested_model: str, pinned_provider: str | None, served_model: str | None,
                 served_provider: str | None, metadata_present: bool, attempt: int | None,
                 attempts_recorded: int, cached: bool, provider_display_names: Iterable[str] | None = ()) -> str:
    """The verdict for one gateway call.

    `provider_display_names` are the endpoints listing's names for the pinned slug; None when no listing
    is at hand (a call log re-checked offline): the served provider's name is then not compared — the
    verdict logged at call time did that with the listing — but a recorded fallback attempt still counts.
    """
    if served_model and not same_model(requested_model, served_model):
        return "model_fallback"
    if cached:
        return "cached"
    if not served_model or not metadata_present or not served_provider:
        return "unverified"
    if not pinned_provider:
        return "exact"  # any provider of the model, after any number of OpenRouter's own fallbacks
    if provider_display_names is not None and not same_provider(pinned_provider, served_provider,
                                                                 provider_display_names):
        return "provider_fallback"
    if fell_back(attempt, attempts_recorded):
        return "provider_fallback"
    return "exact"


def fell_back(attempt: int | None, attempts_recorded: int) -> bool:
    """Did the router try another endpoint before the one that served (`attempt` > 1, or several
    attempts recorded)? Only a fallback against a pinned provider changes the verdict."""
    return (attempt is not None and attempt > 1) or attempts_recorded > 1


def leg_verdict(call_verdicts: Iterable[str]) -> str:
    """The worst call verdict of the calls that served (aborted attempts aside); none is unverified."""
    verdicts = [verdict for verdict in call_verdicts if verdict != ABORTED]
    if not verdicts:
        return "unverified"
    return max(verdicts, key=lambda v: _SEVERITY.get(v, _SEVERITY["unverified"]))


def self_reported_verdict(*, requested_model: str, served_model: str | None) -> str:
    """The verdict for one call through an `openai-compatible` gateway: only the model can be compared."""
    if not served_model:
        return "unverified"
    return "self_reported" if same_model(requested_model, served_model) else "model_fallback"


def is_verified(verdict: str, *, trust_self_reported: bool = False) -> bool:
    return verdict == "exact" or (trust_self_reported and verdict == "self_reported")
