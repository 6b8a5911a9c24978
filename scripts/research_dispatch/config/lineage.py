"""Model lineage: the family a model counts under when the synthesis counts independent agreement.

Why a table and not just the slug's author: "convergent" means at least two *independent* model
families agree, and a model published under one author is often a fine-tune or merge of another
family's model (`tngtech/deepseek-r1t2-chimera` is DeepSeek R1/V3 merged; `nousresearch/hermes-4-405b`
is Llama 3.1 405B post-trained). Counted by author, such a model would confirm its own parent as an
"independent" family. So the family of a model is, in this order:

1. `[tool.research-dispatch] lineage` — model slug → family, the repository's own word;
2. the built-in `DERIVED` table below — known derived models under another author;
3. `[tool.research-dispatch] families` — slug author → family (an author's whole catalogue);
4. the slug's author.

Slugs are compared without a `:variant` suffix (`:free`, `:thinking`) or a trailing date stamp, so a
permaslug counts as the model it names. An author that none of these knows — not a base family in
`BASE_AUTHORS`, not mapped in `families`, the model not in a lineage table — still counts as its own
family, but `unknown_author` names it, so a reviewer can tell the table is silent rather than sure.
Pure data and pure functions; no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

BASE_AUTHORS: Final = frozenset((
    "ai21", "allenai", "amazon", "anthropic", "baidu", "bytedance", "bytedance-seed", "cohere", "deepseek",
    "google", "ibm-granite", "inception", "inclusionai", "liquid", "meituan", "meta-llama", "microsoft", "minimax",
    "mistralai", "moonshotai", "nvidia", "openai", "qwen", "stepfun-ai", "tencent", "thudm", "x-ai", "xiaomi",
    "z-ai",
))
"""Slug authors that publish models of their own family (their own pretraining)."""

DERIVED: Final[Mapping[str, str]] = {
    "cognitivecomputations/dolphin-mistral-24b-venice-edition": "mistralai",
    "deepcogito/cogito-v2-preview-llama-405b": "meta-llama",
    "microsoft/mai-ds-r1": "deepseek",
    "nousresearch/hermes-3-llama-3.1-405b": "meta-llama",
    "nousresearch/hermes-3-llama-3.1-70b": "meta-llama",
    "nousresearch/hermes-4-405b": "meta-llama",
    "nousresearch/hermes-4-70b": "meta-llama",
    "nvidia/llama-3.1-nemotron-ultra-253b-v1": "meta-llama",
    "nvidia/llama-3.3-nemotron-super-49b-v1.5": "meta-llama",
    "perplexity/r1-1776": "deepseek",
    "tngtech/deepseek-r1t-chimera": "deepseek",
    "tngtech/deepseek-r1t2-chimera": "deepseek",
    "tngtech/tng-r1t-chimera": "deepseek",
}
"""Known models derived from another family's model, by canonical slug (see `canonical_slug`)."""

_DATE_SUFFIX = re.compile(r"-(?:\d{8}|\d{4}-\d{2}-\d{2})$")


def canonical_slug(slug: str) -> str:
    """`author/name` in lower case, without a `:variant` suffix or a trailing date stamp."""
    base = slug.strip().lower().split(":", 1)[0]
    author, _, name = base.partition("/")
    return f"{author}/{_DATE_SUFFIX.sub('', name)}" if name else author


def family_of(slug: str, *, lineage: Mapping[str, str], families: Mapping[str, str]) -> str:
    """The family `slug` counts under: configured lineage, built-in lineage, configured author map, author."""
    canonical = canonical_slug(slug)
    configured = {canonical_slug(model): family for model, family in lineage.items()}
    if canonical in configured:
        return configured[canonical]
    if canonical in DERIVED:
        return DERIVED[canonical]
    author = canonical.split("/", 1)[0]
    return families.get(author, author)


def unknown_author(slug: str, *, lineage: Mapping[str, str], families: Mapping[str, str]) -> str | None:
    """The author of `slug` when no table knows it (the model then counts as its own family), else None."""
    canonical = canonical_slug(slug)
    author = canonical.split("/", 1)[0]
    if (author in BASE_AUTHORS or author in families or canonical in DERIVED
            or canonical in {canonical_slug(model) for model in lineage}):
        return None
    return author
