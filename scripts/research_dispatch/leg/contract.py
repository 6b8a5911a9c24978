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
import nothing else of the product; every user message the researcher sends after the first of each of its
two conversations (research, then writing) is one of `FOLLOW_UPS`, each starting with its `*_PREFIX`. Change
a string here and both sides follow.
docs/FAKES.md describes the conversation in prose.
"""

from __future__ import annotations

import re

# --- the first messages (the system prompt states the band; the user prompt starts with the brief) --
BAND_SENTENCE = "Write between {min_words} and {max_words} words."
"""The writing system prompt's word-band rule (`str.format` with `min_words`, `max_words`)."""
TOPIC_ID_LABEL = "Topic id:"
TITLE_LABEL = "Title:"
BRIEF_LABEL = "Research brief:"
DATE_LABEL = "Today's date:"
"""The first user message of both conversations (research, writing): one line per label, in this order, the
brief's text after `BRIEF_LABEL`, then the date (`DATE_LABEL` and an ISO date, `2026-12-04`)."""
READABLE_LABEL = "Named in the brief and readable now with web_extract:"
"""The research conversation's first user message, after the date when the brief names URLs the web search
services can read: this label, then `S<n> <url>` per URL, comma-separated, and a full stop. A URL of the brief
on an internal host (let through by `allow_hosts` for the MCP servers) is not among them."""
PLAN_LABEL = "Research plan:"
DOSSIER_LABEL = "Dossier:"
"""The writing call's first user message goes on, after the brief, with the plan (`PLAN_LABEL`, one numbered
sub-question a line) and the dossier (`DOSSIER_LABEL`, then one `<source id="S<n>" url=".." title="..">`
element per source with every passage the model was shown of it, passages a blank line apart)."""

# --- follow-ups: every later user message of a conversation is one of these ---------------------------
# The research conversation.
START_RESEARCH_PREFIX = "Now research your plan"
START_RESEARCH = (START_RESEARCH_PREFIX + " with the tools. Reply without tool calls once you have the evidence: "
                  "the report is written afterwards, in a separate step.")
"""After a first reply that stated the plan but called no tool."""

GAP_CHECK_PREFIX = "Before the report is written"
GAP_CHECK = (GAP_CHECK_PREFIX + ", check your plan against your sources.{stalled}\nPlan:\n{plan}\n"
             "Read in full: {read}. Known only from search snippets: {snippets}.\n"
             "Reply without tool calls, one line per sub-question: `<n>: S<id>, S<id>` naming the sources that "
             "answer it, or `<n>: none`.")
"""The gap check, once, when research ends with budget left (`plan`: the sub-questions as code numbered them,
or `NO_PLAN`; `stalled`: `STALLED` or nothing). The model points at ids; code decides the gaps."""
STALLED = " Your last {count} searches found no new source: searching has stalled."
NO_PLAN = ("(none was stated: number the brief's sub-questions yourself, one line each: "
           "`<n>. <sub-question>: S<id>, S<id>` or `<n>. <sub-question>: none`)")

GAPS_PREFIX = "Some sub-questions are not settled yet"
GAPS = (GAPS_PREFIX + ":\n{gaps}\nResearch them now, reading pages in full with web_extract: you have {turns} "
        "more turn(s) of tool calls. Then reply without tool calls; the report is written from everything you "
        "were shown.")
"""Sends the model back once, for the gaps that matter (`gaps`: one line each)."""

# The writing conversation.
CONTINUE_PREFIX = "Continue exactly where you stopped"
CONTINUE = CONTINUE_PREFIX + ". Do not repeat anything already written."
"""After `finish_reason: "length"`: the truncated reply is kept and its rest asked for."""

REVISE_PREFIX = "Your draft has"
REVISE = (REVISE_PREFIX + " {words} words; the required band is {min_words}–{max_words} words. {verb} it and "
          "reply with the complete revised report, keeping the [S<n>] citations.")
"""A draft outside the word band (`verb`: Expand or Tighten) is sent back for one complete revision."""

# Either conversation.
EMPTY_REPLY_PREFIX = "Your last reply was empty"
EMPTY_REPLY = EMPTY_REPLY_PREFIX + ". Continue the research or write the report."
"""A reply with neither text nor tool calls, answered once."""

FOLLOW_UPS = (START_RESEARCH, GAP_CHECK, GAPS, CONTINUE, REVISE, EMPTY_REPLY)
FOLLOW_UP_PREFIXES = (START_RESEARCH_PREFIX, GAP_CHECK_PREFIX, GAPS_PREFIX, CONTINUE_PREFIX, REVISE_PREFIX,
                      EMPTY_REPLY_PREFIX)

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


def cited_part(sentence: str) -> str:
    """What the citations of a report sentence vouch for: the evidence of a Recommendations line in the forms
    above, else the whole sentence.

    Why: in `RECOMMENDATION` the decision, the pick over its alternatives, when to switch and the confidence
    are the writer's own judgement, and the `[S<n>]` citations sit in the evidence; a citation judge shown the
    whole line weighs that framing against the source (a page on DAPO's clipping says nothing of "confidence
    high"). Only when every citation marker of the line is inside the evidence: a line that cites its
    condition too is judged whole."""
    for form in (RECOMMENDATION_RE, NOT_RECOMMENDED_RE):
        match = form.match(sentence)
        if match is None:
            continue
        evidence = match.group("evidence").strip()
        if _markers(evidence) == _markers(sentence):
            return evidence.rstrip(".").rstrip()
    return sentence

# --- citations and words ------------------------------------------------------------------------------
CITATION = re.compile(r"\[\s*(S\d+(?:\s*[,;]\s*S\d+)*)\s*\]", re.IGNORECASE)
"""A citation as the model writes it: `[S3]` or `[S1, S4]` (the ids of `<source id="S<n>">` elements)."""

_CODE_BLOCK = re.compile(r"```.*?```", re.DOTALL)
_NUMERIC_CITATION = re.compile(r"\[\d+(?:\s*,\s*\d+)*\]")
_URL = re.compile(r"https?://\S+")
_WORD = re.compile(r"[A-Za-z0-9\u00C0-\u024F\u0370-\u03FF\u0400-\u04FF]+(?:['’.\-][A-Za-z0-9\u00C0-\u024F]+)*")



def _markers(text: str) -> list[str]:
    """The citation markers of `text`, in order: `[S3]` as the model writes them, `[3]` as a report has them."""
    return [m.group(0) for m in re.finditer(f"{CITATION.pattern}|{_NUMERIC_CITATION.pattern}", text, re.IGNORECASE)]

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
