"""The synthesis stage: claims extracted per report, aligned across model families, classified by code,
rendered to `framework/<name>.md`, recorded in `framework/claims.json`, and diffed against the previous
ledger. See `pipeline` for the order of work and each module for its part.
"""

from __future__ import annotations

from research_dispatch.synthesis.pipeline import SynthesisResult, synthesize
from research_dispatch.synthesis.write.diff import DiffItem, LedgerDiff, diff_ledgers

__all__ = ["DiffItem", "LedgerDiff", "SynthesisResult", "diff_ledgers", "synthesize"]
