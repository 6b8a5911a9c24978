"""Route verdicts as docs/ARCHITECTURE.md (§ Route verdicts — FIXED) defines them (pure logic)."""

from __future__ import annotations

import pytest

from research_dispatch.gateway.route import call_verdict, leg_verdict, same_model, same_provider


@pytest.mark.parametrize(("requested", "served", "same"), [
    ("deepseek/deepseek-v4-pro", "deepseek/deepseek-v4-pro", True),
    ("deepseek/deepseek-v4-pro", "deepseek/deepseek-v4-pro-20260401", True),
    ("anthropic/claude-sonnet-4.5", "anthropic/claude-4.5-sonnet-20250929", True),
    ("openai/gpt-5", "openai/gpt-5:nitro", True),
    ("openai/gpt-5", "openai/gpt-5-mini", False),
    ("openai/gpt-5", "openai/gpt-5.1", False),
    ("deepseek/deepseek-v4-pro", "deepseek/deepseek-v4", False),
    ("deepseek/deepseek-v4-pro", "deepinfra/deepseek-v4-pro", False),
    ("openai/gpt-5", None, False),
])
def test_same_model(requested: str, served: str | None, same: bool) -> None:
    assert same_model(requested, served) is same


def test_provider_names_compare_case_and_punctuation_insensitively() -> None:
    assert same_provider("deepseek", "DeepSeek")
    assert same_provider("google-vertex", "Google Vertex")
    assert same_provider("deepinfra/turbo", "DeepInfra")
    assert not same_provider("deepseek", "DeepInfra")
    assert same_provider("google-vertex", "Google", display_names=["Google"])


def verdict(**overrides: object) -> str:
    facts: dict[str, object] = dict(requested_model="deepseek/deepseek-v4-pro", pinned_provider=None,
                                    served_model="deepseek/deepseek-v4-pro", served_provider="DeepSeek",
                                    metadata_present=True, attempt=1, attempts_recorded=1, cached=False)
    facts.update(overrides)
    return call_verdict(**facts)  # type: ignore[arg-type]


def test_exact() -> None:
    assert verdict() == "exact"
    assert verdict(pinned_provider="deepseek") == "exact"
    assert verdict(served_model="deepseek/deepseek-v4-pro-20260401") == "exact"


def test_model_fallback_beats_everything() -> None:
    assert verdict(served_model="deepseek/deepseek-v3", cached=True, metadata_present=False) == "model_fallback"


def test_provider_fallback_when_pinned_provider_differs_or_attempts_recorded() -> None:
    assert verdict(pinned_provider="deepseek", served_provider="DeepInfra") == "provider_fallback"
    assert verdict(pinned_provider="deepseek", attempt=2) == "provider_fallback"
    assert verdict(pinned_provider="deepseek", attempts_recorded=2) == "provider_fallback"


def test_unpinned_provider_change_is_not_a_fallback() -> None:
    assert verdict(served_provider="DeepInfra") == "exact"


def test_unpinned_fallbacks_among_the_models_providers_stay_exact() -> None:
    """docs/ARCHITECTURE.md § Route verdicts: without a pin the route is "this model, any provider"; OpenRouter's
    own fallbacks are its load balancing, whatever the number of attempts."""
    assert verdict(attempt=2) == "exact"
    assert verdict(attempt=5, attempts_recorded=5, served_provider="DeepInfra") == "exact"
    assert verdict(attempt=3, served_model="deepseek/deepseek-v3") == "model_fallback"  # never another model


def test_offline_recheck_without_the_listing_still_sees_a_pinned_fallback() -> None:
    """With no endpoints listing at hand (None) the pinned provider's display name is not compared — the
    verdict logged at call time did that — but a recorded fallback attempt still counts."""
    assert verdict(pinned_provider="novita", served_provider="NovitaAI", provider_display_names=None) == "exact"
    assert verdict(pinned_provider="novita", served_provider="NovitaAI", attempt=2,
                   provider_display_names=None) == "provider_fallback"


def test_cached_and_unverified() -> None:
    assert verdict(cached=True, metadata_present=False) == "cached"
    assert verdict(metadata_present=False) == "unverified"
    assert verdict(served_provider=None) == "unverified"


def test_leg_verdict_is_the_worst_call() -> None:
    assert leg_verdict(["exact", "exact"]) == "exact"
    assert leg_verdict(["exact", "cached"]) == "cached"
    assert leg_verdict(["cached", "unverified", "exact"]) == "unverified"
    assert leg_verdict(["exact", "provider_fallback", "unverified"]) == "provider_fallback"
    assert leg_verdict(["exact", "model_fallback", "provider_fallback"]) == "model_fallback"
    assert leg_verdict([]) == "unverified"
