"""The counting rules, in one place: which claims count, how a side's support is measured and ranked.

docs/METHODOLOGY.md ("Counting") states these rules for readers; `classify` and `align.assemble` use
them and nothing else decides what counts.

* **A claim counts** towards support only when its report counts (`inputs`: a planned leg, not
  failed, a verified route or `count_unverified`), it is *anchored* (code located its units in the
  report body), its position is not contradicted by its own sentence (`extract/position`: a `for`
  beside a negation is never counted), and at least one of its citations is `supported` (a judge of
  another family said so, pointing at a passage sentence that code took and found addressing it).
  With `synthesis.count_unsupported = true` an anchored claim counts without a supported citation —
  unless its own sources only contradict it.
  A claim that is not anchored never counts. Claims that do not count are kept and shown, with why.
* **Support** of a position is the independent families and the distinct sources (urls of
  `supported` citations) of the claims that count for it. Reports are never counted as such: a second
  report of one family adds no family, and a side is ranked by families first, then sources.
* **A tie is a tie of families**: two sides with as many independent families are "no consensus",
  whatever their sources or report counts; the better-sourced one is listed first.
* **One shared source**: agreement counted as convergent whose supported citations all point to one
  url is `shared_source` ("convergent — one shared source"): several families read one page.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from research_dispatch.synthesis.common.checked import Support
from research_dispatch.synthesis.extract.claims import Claim
from research_dispatch.synthesis.read.inputs import Counting


class Standing(str, enum.Enum):
    """Where one claim stands with the counting rules (why it counts, or why not)."""

    COUNTED = "counted"
    EXCLUDED = "excluded"  # its report does not count (route not verified, ...)
    NOT_ANCHORED = "not_anchored"  # its quote is not in the report body
    CONTRADICTED = "contradicted"  # anchored; no citation supports it and one contradicts it
    UNSUPPORTED = "unsupported"  # anchored; no citation supports it (none cited, not addressed, no evidence, phantom)
    POSITION_CONTRADICTED = "position_contradicted"  # its position is `for` beside a negation in its own sentence

    @property
    def reason(self) -> str:
        """Why a claim with this standing does not count (empty for a counted claim)."""
        return _REASONS[self]


_REASONS = {
    Standing.COUNTED: "",
    Standing.EXCLUDED: "its report is excluded from support",
    Standing.NOT_ANCHORED: "its quote is not in the report",
    Standing.CONTRADICTED: "its own source contradicts it",
    Standing.UNSUPPORTED: "no citation of it is supported by its source",
    Standing.POSITION_CONTRADICTED: "its own sentence contradicts its position (a negation beside its pick)",
}


def supported_urls(claim: Claim) -> frozenset[str]:
    """The urls of a claim's `supported` citations."""
    return frozenset(c.url for c in claim.citations if c.support is Support.SUPPORTED and c.url)


def evidence_standing(claim: Claim) -> Standing:
    """A claim's standing from what code checked of it alone (its report's standing aside)."""
    if not claim.anchored:
        return Standing.NOT_ANCHORED
    if supported_urls(claim):
        return Standing.COUNTED
    if any(c.support is Support.CONTRADICTED for c in claim.citations):
        return Standing.CONTRADICTED
    return Standing.UNSUPPORTED


def standing(claim: Claim, report: Counting, *, count_unsupported: bool) -> Standing:
    """Does this claim count, and if not, why not."""
    if not report.counted:
        return Standing.EXCLUDED
    if claim.anchored and claim.position_contradicted:
        return Standing.POSITION_CONTRADICTED
    checked = evidence_standing(claim)
    if checked is Standing.UNSUPPORTED and count_unsupported:
        return Standing.COUNTED
    return checked


def counted_claims(claims: Iterable[Claim], counting: Mapping[str, Counting], *,
                   count_unsupported: bool) -> frozenset[str]:
    """The keys of the claims that count."""
    return frozenset(c.key for c in claims
                     if standing(c, counting[c.report], count_unsupported=count_unsupported) is Standing.COUNTED)


@dataclass(frozen=True)
class Tally:
    """What checking found over a set of claims; the numbers add up: `anchored` = `supported` +
    `unsupported` + `contradicted`, and `claims` = `anchored` + not anchored."""

    claims: int
    reports: int
    anchored: int
    supported: int
    unsupported: int
    contradicted: int
    counted: int

    @property
    def not_anchored(self) -> int:
        return self.claims - self.anchored

    @classmethod
    def of(cls, claims: Iterable[Claim], counted: frozenset[str]) -> Tally:
        items = list(claims)
        checked = [evidence_standing(c) for c in items]
        return cls(claims=len(items), reports=len({c.report for c in items}),
                   anchored=sum(1 for s in checked if s is not Standing.NOT_ANCHORED),
                   supported=sum(1 for s in checked if s is Standing.COUNTED),
                   unsupported=sum(1 for s in checked if s is Standing.UNSUPPORTED),
                   contradicted=sum(1 for s in checked if s is Standing.CONTRADICTED),
                   counted=sum(1 for c in items if c.key in counted))

    def as_dict(self) -> dict[str, int]:
        return {"claims": self.claims, "reports": self.reports, "anchored": self.anchored,
                "not_anchored": self.not_anchored, "supported": self.supported, "unsupported": self.unsupported,
                "contradicted": self.contradicted, "counted": self.counted}


def families_of(reports: Iterable[str], counting: Mapping[str, Counting]) -> list[str]:
    return sorted({family for r in reports for family in counting[r].families})


def sources_of(claims: Iterable[Claim]) -> list[str]:
    """The distinct urls of the supported citations of these (counted) claims, sorted."""
    return sorted({url for claim in claims for url in supported_urls(claim)})


def rank(families: list[str], sources: list[str]) -> tuple[int, int]:
    """What orders the sides of a divergence: independent families, then distinct supporting sources."""
    return len(families), len(sources)


def tied(first: tuple[int, int], second: tuple[int, int]) -> bool:
    """Two ranks tie when their families do: sources order sides, they never make a favourite."""
    return first[0] == second[0]


def shared_source(convergent: bool, sources: list[str]) -> bool:
    """Convergent agreement whose supported citations all point to one url."""
    return convergent and len(sources) == 1
