"""What a model points at: numbered pieces of a text, cross-checked by the words it copied from them.

The extractor points at report units and the citation judge at passage sentences (`units`), each
adding the opening words of what it points at. Code decides which whole pieces were meant (DESIGN.md,
"Evidence and checked claims": a quote is always whole units or sentences, taken by code):

1. Every pointer is a piece the model could see, and its copy fits them (`copies`, tolerantly) or it
   copied nothing: those pieces (`pointer`).
2. The pointers are pieces but the copy does not fit them. When it fits the pieces one step away
   instead (every pointer moved by the same one piece), the model pointed next door: those pieces
   (`corrected`). Otherwise the pointer wins (`pointer`): a copy that fits nowhere near is a copy
   slip or a paraphrase, and a copy slip never drops a claim.
3. No pointer, or one that is not a piece it could see (out of range, not an id): the copy alone, when
   it fits exactly one piece or one pair of consecutive pieces (`copy`). Otherwise nothing was pointed
   at, and `Missed.reason` says why: the pointer out of range, the copy found nowhere or in several
   places.

At most `MAX_POINTED` pieces are taken. Pure functions of the text and the answer: pointing again at
the pieces found gives the same pieces, so an answer replayed from the cache is the answer that was
written.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Generic

from research_dispatch.synthesis.read import copies
from research_dispatch.synthesis.read.units import Numbered, S

MAX_POINTED = 3


@dataclass(frozen=True)
class Pointed(Generic[S]):
    items: tuple[S, ...]
    how: str  # "pointer", "corrected" (one piece off, put right by the copy), "copy" (no usable pointer)


@dataclass(frozen=True)
class Missed:
    reason: str


def locate(pointers: Sequence[str], copy: str, text: Numbered[S], *,
           among: Collection[int] | None = None) -> Pointed[S] | Missed:
    """The pieces a model pointed at (module docstring), or why none. `among`: the numbers of the pieces
    it was shown (all of them when None); a pointer to another piece is not a pointer it could make."""
    visible = [i for i in text.items if among is None or i.number in among]
    seen = {i.number for i in visible}

    def piece(number: int) -> S | None:
        found = text.get(number)
        return found if found is not None and found.number in seen else None

    def fits(items: Sequence[S]) -> bool:
        return copies.matches(copy, text.quote(items))

    resolved = {p: text.get(p) for p in pointers[:MAX_POINTED]}
    bad = [p for p, i in resolved.items() if i is None or i.number not in seen]
    pointed = sorted({i for i in resolved.values() if i is not None}, key=lambda i: i.number)
    if pointers and not bad:
        if copy.strip() and not fits(pointed):
            for step in (-1, 1):
                moved = [piece(i.number + step) for i in pointed]
                if all(moved) and fits([m for m in moved if m is not None]):
                    return Pointed(tuple(m for m in moved if m is not None), "corrected")
        return Pointed(tuple(pointed), "pointer")
    places: list[tuple[S, ...]] = []
    if copy.strip():
        places = [(i,) for i in visible if fits([i])] or \
            [(a, b) for a, b in itertools.pairwise(visible) if b.number == a.number + 1 and fits([a, b])]
    if len(places) == 1:
        return Pointed(places[0], "copy")
    return Missed(_why_not(bad, copy, len(places), len(visible)))


def _why_not(bad: Sequence[str], copy: str, places: int, count: int) -> str:
    if bad:
        said = f"it pointed at {', '.join(repr(p)[:24] for p in bad[:3])}, out of the {count} it was shown"
    else:
        said = "it pointed at nothing"
    if not copy.strip():
        return said + ", and copied no words to find it by"
    if places:
        return said + f", and the words it copied fit {places} places"
    return said + ", and the words it copied are not there"
