"""The vocabulary of checked claims (docs/ARCHITECTURE.md, "Evidence and checked claims" — FIXED).

A claim counts only when code has checked it: its `quote` is whole units of the report body that code
located from the extractor's pointer (`anchored`), and each source it cites gets a `CitationCheck` whose
`support` says what code could verify. `supported` / `contradicted` stand only when a judge of another
family than the report's author said so, pointing at sentences of the stored passage (`passage_sha256`)
that code took as the citation's `quote` and found addressing the claim; a judge's say-so alone is
`unsupported`. These names are written to `framework/claims.json` as they are here.

This module is the one place the names live, so that extraction, citation checking, counting,
diffing and rendering agree on them.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Position(str, enum.Enum):
    """Where a claim stands on its pick: `for` (a conditional claim is `for`, with its condition set) or
    `against` ("we do not recommend X" counts against X, never for it)."""

    FOR = "for"
    AGAINST = "against"


class Support(str, enum.Enum):
    """What code could verify about one citation of one claim."""

    SUPPORTED = "supported"  # another family's judge said so, pointing at passage sentences that address the claim
    CONTRADICTED = "contradicted"  # as above, but the passage says the opposite
    UNSUPPORTED = "unsupported"  # the judge found nothing, or pointed at no sentence that addresses the claim
    NO_EVIDENCE = "no_evidence"  # no stored passage for the cited url
    PHANTOM = "phantom"  # a citation marker that is not in the report's reference list (url null)

    @property
    def verified(self) -> bool:
        """True when code took the judge's pointed sentences from the passage (the verdict stands)."""
        return self in (Support.SUPPORTED, Support.CONTRADICTED)


@dataclass(frozen=True)
class CitationCheck:
    """One source a claim cites, and what checking it against the stored evidence found.

    `quote` and `passage_sha256` are set only when `support.verified`: the passage's own words that
    support (or contradict) the claim, and the sha256 of the evidence line they were found in.
    """

    url: str | None
    support: Support
    quote: str | None = None
    passage_sha256: str | None = None

    def __post_init__(self) -> None:
        if self.support.verified != (self.quote is not None and self.passage_sha256 is not None):
            raise ValueError(f"a {self.support.value} citation carries a quote and a passage hash; others carry none")
        if (self.url is None) != (self.support is Support.PHANTOM):
            raise ValueError("only a phantom citation has no url")
