"""Models point, code quotes (issue 29.1), at the seam where code numbers text and reads pointers: a report's
units and a passage's sentences (`read/units`), the tolerant cross-check of a model's copy (`read/copies`), and
which whole pieces a pointer means (`read/pointers`) — examples, and `hypothesis` properties: numbering is a
function of the text, every piece is whole and in order, and any harmless copy slip still fits."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from research_dispatch.synthesis.read import copies
from research_dispatch.synthesis.read.pointers import Missed, Pointed, locate
from research_dispatch.synthesis.read.units import (
    UnitKind,
    passage_sentences,
    report_units,
    shows_as_written,
)
from research_dispatch_fakes import realism
from tests.profiles import examples

BODY = """# GRPO for post-training

Intro text before any section, long enough to be a sentence of its own.

## What the sources establish

GRPO with two-sided clipping is stable on stale rollouts [1, 3]. This sentence cites nothing, e.g. no page.
A paragraph that cites once at its end has a first sentence. And a second one [2].

- A list item stating that “Monarch” scales to 1000 hosts [4].
- Another item, with **bold** words
  and `code` spans in it [5].

| Method | AIME 2024 |
|---|---|
| DAPO | 50 |

```
Fenced code. Not a unit.
```

## Recommendations

We do not recommend PPO — it needs a critic — for long-horizon agents [2]. Shao et al. found the same.
"""


def test_a_report_is_numbered_in_sentences_items_and_rows_under_their_sections() -> None:
    units = report_units(BODY)
    got = [(u.label, u.kind, u.section, " ".join(units.words(u).split())) for u in units.items]
    assert got == [
        ("U1", UnitKind.SENTENCE, "GRPO for post-training",
         "Intro text before any section, long enough to be a sentence of its own."),
        ("U2", UnitKind.SENTENCE, "What the sources establish",
         "GRPO with two-sided clipping is stable on stale rollouts [1, 3]."),
        ("U3", UnitKind.SENTENCE, "What the sources establish", "This sentence cites nothing, e.g. no page."),
        ("U4", UnitKind.SENTENCE, "What the sources establish",
         "A paragraph that cites once at its end has a first sentence."),
        ("U5", UnitKind.SENTENCE, "What the sources establish", "And a second one [2]."),
        ("U6", UnitKind.ITEM, "What the sources establish",
         "A list item stating that “Monarch” scales to 1000 hosts [4]."),
        ("U7", UnitKind.ITEM, "What the sources establish",
         "Another item, with **bold** words and `code` spans in it [5]."),
        ("U8", UnitKind.ROW, "What the sources establish", "| Method | AIME 2024 |"),
        ("U9", UnitKind.ROW, "What the sources establish", "| DAPO | 50 |"),
        ("U10", UnitKind.SENTENCE, "Recommendations",
         "We do not recommend PPO — it needs a critic — for long-horizon agents [2]."),
        ("U11", UnitKind.SENTENCE, "Recommendations", "Shao et al. found the same."),
    ]
    assert units.markers([units.get("U2")]) == {1, 3} and units.markers([units.get("U4")]) == set()  # type: ignore
    assert units.block_markers([units.get("U4")]) == {1, 2, 3}  # type: ignore[list-item]  # its paragraph's
    numbered = units.numbered()
    assert "[U6] A list item" in numbered and "- [U7] Another item" in numbered and "Fenced code" not in numbered
    assert "## Recommendations\n\n[U10] We do not recommend PPO" in numbered
    assert units.get("u3") == units.get("[U3]") == units.get(3) and units.get("U99") is None


def test_a_passage_is_numbered_in_sentences_through_pdf_wraps_and_elisions() -> None:
    text = ("The model was trained with compu-\ntation spread over\nmany GPUs. It \ufb01nds results [3]. […] "
            "Another part.\n\n- item one. item two\n| a | b |\n" + "word " * 200)
    numbered = passage_sentences(text)
    words = [" ".join(numbered.words(s).split()) for s in numbered.items]
    assert words[:6] == ["The model was trained with compu- tation spread over many GPUs.",
                         "It \ufb01nds results [3].", "Another part.", "item one.", "item two", "| a | b |"]
    assert all(len(w) <= 600 for w in words)  # a run without a sentence end is cut into bounded pieces
    assert numbered.shown([1, 2, 4]) == ("[S1] The model was trained with compu- tation spread over many GPUs. "
                                         "[S2] It \ufb01nds results [3]. … [S4] item one.")


_WORDS = st.sampled_from(["GRPO", "PPO", "stable", "rollouts", "the", "is", "not", "Monarch", "scales", "to", "e.g.",
                          "hosts", "clipping", "default", "DAPO", "reaches", "50", "points", "2.5", "Shao", "et",
                          "al."])
_SENTENCE = st.lists(_WORDS, min_size=3, max_size=12).map(lambda ws: " ".join(ws) + ".")
_BLOCK = st.one_of(st.lists(_SENTENCE, min_size=1, max_size=4).map(" ".join),
                   _SENTENCE.map(lambda s: "- " + s), _SENTENCE.map(lambda s: "| " + s + " |"),
                   st.sampled_from(["## Findings", "## Other", "```\ncode.\n```"]))
_BODIES = st.lists(_BLOCK, min_size=1, max_size=6).map("\n\n".join)


@settings(max_examples=examples(30), deadline=None)
@given(body=_BODIES)
def test_units_are_whole_disjoint_in_order_and_a_function_of_the_body(body: str) -> None:
    units = report_units(body)
    assert units == report_units(str(body))  # same body, same numbers
    previous = 0
    for number, unit in enumerate(units.items, start=1):
        assert unit.number == number and previous <= unit.start < unit.end <= len(body)
        assert units.words(unit).strip() == units.words(unit) and units.words(unit)
        previous = unit.end
    assert len([line for line in units.numbered().splitlines() if "[U" in line]) == len(units.items)
    assert "code." not in units.numbered()


SENTENCE = "We do not think GRPO alone should be the default algorithm for RL fine-tuning [3]."


@pytest.mark.parametrize("kind", realism.COPY_SLIPS)
def test_every_harmless_copy_slip_still_fits(kind: str) -> None:
    opening = "We do not think GRPO alone should be the default"
    assert copies.matches(realism._copied(opening, kind, (3,)), SENTENCE), kind
    assert copies.matches(realism._copied(realism.pdf_artefacts(
        "fine-tuning of a reinforcement learning algorithm", realism.Realism(1.0, 0), "https://arxiv.org/abs/1"),
        kind, ()), "fine-tuning of a reinforcement learning algorithm"), kind


def test_a_copy_that_changes_the_words_does_not_fit() -> None:
    assert not copies.matches("GRPO alone should not be the default", SENTENCE)
    assert not copies.matches("We do think GRPO alone should be", SENTENCE)
    assert not copies.matches("use GRPO", SENTENCE)  # too short to show anything
    assert copies.matches("We do not think ... the default algorithm", SENTENCE)  # an ellipsis may leave words out
    assert copies.matches("see the link text here", "[see the link](https://example.org) text here")


_PLAIN = st.lists(st.sampled_from(["grpo", "ppo", "the", "default", "is", "not", "stable", "dapo", "50"]),
                  min_size=3, max_size=15).map(" ".join)


@settings(max_examples=examples(50), deadline=None)
@given(sentence=_PLAIN, start=st.integers(0, 12), width=st.integers(3, 12), kind=st.sampled_from(realism.COPY_SLIPS))
def test_any_slipped_copy_of_consecutive_words_fits_its_sentence(sentence: str, start: int, width: int,
                                                                 kind: str) -> None:
    words = sentence.split()
    part = " ".join(words[start:start + width])
    if len(part.split()) < copies.MIN_WORDS:
        return
    assert copies.matches(realism._copied(part, kind, (2,)), sentence)


def test_a_pointer_wins_a_copy_puts_an_off_by_one_right_and_a_copy_alone_finds_a_unique_unit() -> None:
    units = report_units(BODY)
    assert locate(["U10"], "We do not recommend PPO", units) == Pointed((units.get(10),), "pointer")
    assert locate(["U10"], "a copy that fits nowhere", units) == Pointed((units.get(10),), "pointer")
    assert locate(["U11"], "“we do not recommend PPO...", units) == Pointed((units.get(10),), "corrected")
    assert locate([], "And a second one (2).", units) == Pointed((units.get(5),), "copy")
    assert locate(["U99"], "scales to 1000 hosts", units) == Pointed((units.get(6),), "copy")
    missed = locate(["U99"], "words that are nowhere here", units)
    assert isinstance(missed, Missed) and "'U99', out of the 11" in missed.reason and "not there" in missed.reason
    both = locate(["U4", "U5"], "A paragraph that cites once", units)
    assert isinstance(both, Pointed) and [u.number for u in both.items] == [4, 5]
    assert isinstance(locate([], "", units), Missed)


def test_text_a_document_would_strip_is_not_shown_as_written() -> None:
    assert shows_as_written("GRPO is stable on stale rollouts [1].")
    assert not shows_as_written("This sentence hides <!-- an HTML comment --> inside the report text.")
