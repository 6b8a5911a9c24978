"""The synthesis as a reader opens it (issue 30.8): the decision table first, then how it was made — the
extractor and judge models the ledger records, and the method text wrapped, not one 190-word line."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from research_dispatch.synthesis.write.render import WRAP, _wrapped
from tests.profiles import examples
from tests.synthesis.test_asked import run


def test_the_document_opens_with_the_decision_table_and_names_its_models(tmp_path: Path) -> None:
    data, document, _repo = run(tmp_path)
    table = document.index("## TL;DR — decision table")
    method = document.index("## How this synthesis was made")
    assert table < method < document.index("## Agreement matrix")
    assert "A claim counts only when" in document[method:]  # the method text comes after the table
    assert "**Claims.**" not in document[:table] and "**Decisions and findings.**" not in document[:table]
    models = " ".join(document[method:].split("\n\n", 2)[1].split())
    extractor = data["settings"]["extractor_model"]
    judges = sorted({b["judge_model"] for b in data["batches"]})
    checkers = sorted({c["judge_model"] for c in data["citation_checks"] if c["judge_model"]})
    assert models.startswith(f"**Models.** Extractor: `{extractor}`."), models
    assert all(f"`{judge}`" in models for judge in [*judges, *checkers]), models
    prose = document[method:document.index("## Agreement matrix")]
    assert max(len(line) for line in prose.splitlines()) <= WRAP, prose


WORDS = st.text(st.sampled_from("ab-*_=#>1.)`[]\\<|~"), min_size=1, max_size=8)
COMMONMARK = MarkdownIt("commonmark")


def _blocks(text: str) -> list[tuple[str, str]]:
    """What a CommonMark renderer makes of `text`: its block tokens, and the inline text with line breaks
    read as spaces (a soft break is a space; a hard break would show)."""
    out = []
    for token in COMMONMARK.parse(text):
        children = [c.type for c in token.children or [] if c.type not in {"softbreak", "text"}]
        out.append((token.type, " ".join(token.content.split()) + repr(children) if token.type == "inline" else ""))
    return out


@pytest.mark.parametrize("tail", ["---", "***", "___", "- - -", "===", "-", "=", "1.", "2)", "- x", "+ x", "* x",
                                  "# x", "> x", "| x", "<div>", "```", "~~~", "a\\ b", "**bold**", "`code`"])
def test_a_line_that_would_start_a_block_keeps_the_paragraph_whole(tail: str) -> None:
    paragraph = "wordy " * 16 + "wor " + tail  # the tail opens the second line
    lines = _wrapped(paragraph)
    assert _blocks("\n".join(lines)) == _blocks(paragraph), lines


@settings(max_examples=examples(300))
@given(st.lists(WORDS, min_size=1, max_size=80))
def test_a_wrapped_paragraph_renders_as_the_one_line_paragraph(words: list[str]) -> None:
    """Wrapping never changes what Markdown renders, checked by an independent CommonMark implementation
    (markdown-it): a line that would start a block (a list item, a quote, a heading, a setext underline)
    keeps the paragraph on one line."""
    paragraph = " ".join(words)
    lines = _wrapped(paragraph)
    assert " ".join(lines).split() == paragraph.split()
    assert all(len(line) <= WRAP for line in lines) or lines == [paragraph]
    assert _blocks("\n".join(lines)) == _blocks(paragraph), lines
