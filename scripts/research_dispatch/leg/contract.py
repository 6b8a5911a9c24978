"""The conversation contract: what the researcher writes to the model and the scripted model keys on.

The offline fakes import nothing of the product (docs/ARCHITECTURE.md): a fake that shared the product's parsing
or logic could not catch its bugs. This module is the one exception, because it holds no logic: it is
the protocol both sides agree on, like a wire format — the labels of the first messages, the
follow-up prompts the researcher may send (the fake's scripted model recognises each by its opening),
the citation marker, and what counts as a word of a report (the scripted model sizes its reports by
it; the product checks the word band and writes `words` by it). When these strings lived twice, a
reworded prompt silently stopped being recognised by the fake and tests passed or failed for the
wrong reason.

Rules (tests/test_contract.py checks them): this module imports only the standard library; the fakes
import nothing else of the product; every user message the researcher sends after its brief is one of
`FOLLOW_UPS`, each starting with its `*_PREFIX`. Change a string here and both sides follow.
docs/FAKES.md describes the conversation in prose.
"""

from __future__ import annotations

import re

# --- the first messages (the system prompt states the band; the user prompt starts with the brief) --
BAND_SENTENCE = "Write between {min_words} and {max_words} words."
"""The system prompt's word-band rule (`str.format` with `min_words`, `max_words`)."""
TOPIC_ID_LABEL = "Topic id:"
TITLE_LABEL = "Title:"
BRIEF_LABEL = "Research brief:"
"""The first user message: one line per label, in this order, the brief's text after `BRIEF_LABEL`."""

# --- follow-ups: every later user message of a researcher conversation is one of these -----------------
STOP_RESEARCHING_PREFIX = "Stop researching:"
STOP_RESEARCHING = (STOP_RESEARCHING_PREFIX + " the {cap} is reached. Write the complete report now from the "
                    "sources above, citing their [S<n>] ids. Do not call tools.")
"""Near a cap: the tools close (`tool_choice: "none"`) and the report is asked for (`cap`: which one)."""

CONTINUE_PREFIX = "Continue exactly where you stopped"
CONTINUE = CONTINUE_PREFIX + ". Do not repeat anything already written."
"""After `finish_reason: "length"`: the truncated reply is kept and its rest asked for."""

REVISE_PREFIX = "Your draft has"
REVISE = (REVISE_PREFIX + " {words} words; the required band is {min_words}–{max_words} words. {verb} it and "
          "reply with the complete revised report, keeping the [S<n>] citations.")
"""A draft outside the word band (`verb`: Expand or Tighten) is sent back for one complete revision."""

EMPTY_REPLY_PREFIX = "Your last reply was empty"
EMPTY_REPLY = EMPTY_REPLY_PREFIX + ". Continue the research or write the report."
"""A reply with neither text nor tool calls, answered once."""

FOLLOW_UPS = (STOP_RESEARCHING, CONTINUE, REVISE, EMPTY_REPLY)
FOLLOW_UP_PREFIXES = (STOP_RESEARCHING_PREFIX, CONTINUE_PREFIX, REVISE_PREFIX, EMPTY_REPLY_PREFIX)

# --- recommendations: one line per decision, one per rejected option (what the synthesis aligns) ----
RECOMMENDATION = ("- **{decision}:** {pick} over {alternatives} — {evidence}; switch to {switch_to} when {condition}; "
                  "confidence {confidence}.")
"""One decision of a report's `## Recommendations`: the decision, the pick over its alternatives, the evidence
with its `[S<n>]` citations, when to switch (to what), and the confidence (high, medium or low). The writer is
shown it with `<placeholders>`; the scripted model writes it; `RECOMMENDATION_RE` reads it back."""
NOT_RECOMMENDED = "- **Not recommended:** {option} for {decision}, because {evidence}."
"""One rejected option, with the evidence (cited) for rejecting it."""

RECOMMENDATION_RE = re.compile(
    r"^\s*(?:[-*+]\s+|\d+[.)]\s+)?\*{0,2}(?P<decision>[^*\n:]{2,160}?)\*{0,2}:\*{0,2}\s+(?P<pick>[^\n]+?)\s+"
    r"(?:over|rather than|instead of)\s+(?P<alternatives>[^\n]+?)\s+[\u2014\u2013:-]+\s+(?P<evidence>[^\n]+?);\s*"
    r"switch(?:\s+to\s+(?P<switch_to>[^\n;]+?))?\s+(?:when|once|if|as soon as)\s+(?P<condition>[^\n;]+?);\s*"
    r"confidence:?\s*(?P<confidence>high|medium|low)\b", re.IGNORECASE)
"""A decision line in the form of `RECOMMENDATION` (read leniently: a numbered item, no bold, `:` for the dash,
`once`/`if` for `when`)."""
NOT_RECOMMENDED_RE = re.compile(
    r"^\s*(?:[-*+]\s+|\d+[.)]\s+)?\*{0,2}not recommended:?\*{0,2}:?\s+(?P<option>[^\n]+?)\s+for\s+"
    r"(?P<decision>[^\n]+?),?\s+because\s+(?P<evidence>[^\n]+)$", re.IGNORECASE)
"""A rejected-option line in the form of `NOT_RECOMMENDED`."""

# --- citations and words ------------------------------------------------------------------------------
CITATION = re.compile(r"\[\s*(S\d+(?:\s*[,;]\s*S\d+)*)\s*\]", re.IGNORECASE)
"""A citation as the model writes it: `[S3]` or `[S1, S4]` (the ids of `<source id="S<n>">` elements)."""

_CODE_BLOCK = re.compile(r"```.*?```", re.DOTALL)
_NUMERIC_CITATION = re.compile(r"\[\d+(?:\s*,\s*\d+)*\]")
_URL = re.compile(r"https?://\S+")
_WORD = re.compile(r"[A-Za-z0-9\u00C0-\u024F\u0370-\u03FF\u0400-\u04FF]+(?:['’.\-][A-Za-z0-9\u00C0-\u024F]+)*")


def count_words(markdown: str) -> int:
    """Words of prose: citation markers, URLs, code and Markdown punctuation do not count.

    The one word count of the project: the word band, a report's `words`, and the length the scripted
    model writes to. A word is a run of letters or digits (Latin, Greek, Cyrillic), joined across an
    apostrophe, a full stop or a hyphen (`don't`, `1.5B`, `state-of-the-art`).
    """
    text = _CODE_BLOCK.sub(" ", markdown)
    text = CITATION.sub(" ", text)
    text = _NUMERIC_CITATION.sub(" ", text)
    text = _URL.sub(" ", text)
    return len(_WORD.findall(text))
