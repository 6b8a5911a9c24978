"""Anchoring a claim in its report: the verbatim comparison, the section, the markers, and the rules as
`hypothesis` properties (anchored ⇔ the quote is found after normalisation; anchoring is a fixed point)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from research_dispatch.synthesis.extract.anchor import ReportBody, anchor, sentence_markers
from research_dispatch.synthesis.read import verbatim
from tests.profiles import examples

BODY = """# GRPO for post-training

Intro text before any section, long enough to be a sentence of its own.

## What the sources establish

GRPO with two-sided clipping is stable on stale rollouts [1, 3]. This sentence cites nothing at all here.
A paragraph that cites once at its end has a first sentence. And a second one [2].

- A list item stating that “Monarch” scales to 1000 hosts [4].
- Another item, with **bold** words and `code` spans in it [5].

## Recommendations

We do not recommend PPO — it needs a critic — for long-horizon agents [2].
GRPO with two-sided clipping is stable on stale rollouts [1, 3].
"""


def test_whitespace_quote_marks_dashes_markup_and_markers_are_normalised_words_are_not() -> None:
    assert verbatim.contains(BODY, "We do not recommend PPO - it needs a critic - for long-horizon agents")
    assert verbatim.contains(BODY, 'a list item stating that "Monarch"  scales\nto 1000 hosts'.replace("a l", "A l"))
    assert verbatim.contains(BODY, "Another item, with bold words and code spans in it.")
    assert verbatim.contains(BODY, "GRPO with two-sided clipping is stable on stale rollouts.")
    # case, words and paraphrase are not normalised
    assert not verbatim.contains(BODY, "grpo with two-sided clipping is stable on stale rollouts")
    assert not verbatim.contains(BODY, "We recommend PPO - it needs a critic")
    assert not verbatim.contains(BODY, "GRPO with two-sided clipping is always stable on stale rollouts")
    # a quote cut inside a word, or too short to show anything, is not found
    assert not verbatim.contains(BODY, "RPO with two-sided clipping is stable")
    assert not verbatim.contains(BODY, "GRPO with")


def test_the_section_is_the_heading_above_the_quote_and_the_models_section_only_picks_an_occurrence() -> None:
    body = ReportBody(BODY)
    quote = "GRPO with two-sided clipping is stable on stale rollouts"
    first = anchor(quote, body, section_hint=None, numbers=[])
    assert first is not None and first.section == "What the sources establish" and first.markers == (1, 3)
    hinted = anchor(quote, body, section_hint="Recommendations", numbers=[])
    assert hinted is not None and hinted.section == "Recommendations" and hinted.start > first.start
    # a wrong hint is only a hint: the first occurrence, under its real heading
    wrong = anchor(quote, body, section_hint="Nowhere", numbers=[])
    assert wrong == first
    intro = anchor("Intro text before any section", body, section_hint="Recommendations", numbers=[])
    assert intro is not None and intro.section == "GRPO for post-training"  # the title heading is a section
    assert anchor("Intro text before any section", ReportBody("Intro text before any section."),
                  section_hint=None, numbers=[]) is not None


def test_markers_come_from_the_quoted_sentence_else_the_models_numbers_found_in_the_same_block() -> None:
    body = ReportBody(BODY)
    uncited = anchor("This sentence cites nothing at all here", body, section_hint=None, numbers=[1, 3, 7])
    # the sentence has no marker; 1 and 3 are markers of the same paragraph, 7 appears nowhere near it
    assert uncited is not None and uncited.markers == (1, 3)
    assert anchor("This sentence cites nothing at all here", body, section_hint=None, numbers=[]).markers == ()
    first = anchor("A paragraph that cites once at its end", body, section_hint=None, numbers=[2])
    assert first is not None and first.markers == (2,)
    item = anchor("Another item, with bold words", body, section_hint=None, numbers=[4])
    assert item is not None and item.markers == (5,)  # a list item is its own block: its own marker only
    start = BODY.index("We do not")
    assert sentence_markers(BODY, start, start + 20) == ({2}, {1, 2, 3})  # two lines, one paragraph


def test_the_anchored_quote_is_the_reports_own_text_and_hostile_text_is_not_anchored() -> None:
    body = ReportBody(BODY)
    found = anchor("We do not recommend PPO - it needs a critic - for long-horizon agents", body,
                   section_hint=None, numbers=[])
    assert found is not None and found.quote == "We do not recommend PPO — it needs a critic — for long-horizon agents"
    hostile = ReportBody("## Notes\n\nThis sentence hides <!-- an HTML comment --> inside the report text.\n")
    assert anchor("This sentence hides <!-- an HTML comment --> inside", hostile, section_hint=None, numbers=[]) is None


_WORDS = st.sampled_from(["GRPO", "PPO", "stable", "rollouts", "the", "is", "not", "Monarch", "scales", "to", "hosts",
                          "with", "clipping", "default", "DAPO", "reaches", "50", "points"])
_SENTENCE = st.lists(_WORDS, min_size=4, max_size=12).map(lambda ws: " ".join(ws) + ".")
_BODIES = st.lists(st.tuples(st.sampled_from(["", "## Findings\n\n", "## Other\n\n"]), _SENTENCE,
                             st.sampled_from(["", " [1]", " [2, 3]"])), min_size=1, max_size=8).map(
    lambda parts: "\n\n".join(f"{h}{s[:-1]}{m}." for h, s, m in parts))
_PERTURB = st.sampled_from([lambda t: t, lambda t: t.replace(" ", "  "), lambda t: t.replace(" ", "\n", 1),
                            lambda t: t.replace("-", "\u2014"), lambda t: f"**{t}**"])


@settings(max_examples=examples(150), deadline=None)
@given(body=_BODIES, start=st.integers(0, 400), length=st.integers(1, 200), perturb=_PERTURB,
       hint=st.sampled_from([None, "Findings", "Other"]))
def test_anchored_if_and_only_if_the_quote_is_found_after_normalisation(body: str, start: int, length: int,
                                                                          perturb, hint: str | None) -> None:
    quote = perturb(body[start:start + length])
    prepared = ReportBody(body)
    found = anchor(quote, prepared, section_hint=hint, numbers=[1])
    assert (found is not None) == bool(verbatim.find_all(quote, body))
    if found is not None:
        assert verbatim.comparable(found.quote) == verbatim.comparable(quote).strip()
        # a fixed point: the anchored quote under the section code found anchors to the same place
        assert anchor(found.quote, prepared, section_hint=found.section, numbers=found.markers) == found


@pytest.mark.slow
@settings(max_examples=examples(100), deadline=None)
@given(body=_BODIES, start=st.integers(0, 400), length=st.integers(20, 200), at=st.integers(0, 30))
def test_an_overstated_quote_is_never_anchored(body: str, start: int, length: int, at: int) -> None:
    """A word the report never wrote, put into a span of it, can never be anchored."""
    words = body[start:start + length].split(" ")
    words.insert(min(at, len(words)), "always")
    assert anchor(" ".join(words), ReportBody(body), section_hint=None, numbers=[]) is None
