"""Chunk ranking keeps the relevant passages of a long page (pure logic)."""

from __future__ import annotations

from research_dispatch.tools.chunks import best_chunks, split_chunks


def test_relevant_passages_survive_within_budget() -> None:
    filler = "\n\n".join(f"Cookie notice and navigation paragraph number {i} about nothing." * 3 for i in range(40))
    key = "DiLoCo reduces communication between workers by running many inner steps before an outer sync."
    page = filler + "\n\n" + key + "\n\n" + filler
    excerpt, kept, total = best_chunks(page, "DiLoCo communication outer sync", budget_chars=1200)
    assert key in excerpt
    assert len(excerpt) <= 1200 + 20
    assert kept < total


def test_short_pages_are_returned_whole() -> None:
    assert best_chunks("short page", "anything", 500) == ("short page", 1, 1)


def test_chunks_are_paragraph_aligned_and_bounded() -> None:
    text = "\n\n".join("Sentence one. Sentence two. " * 10 for _ in range(10))
    chunks = split_chunks(text, 700)
    assert all(len(c) <= 1050 for c in chunks)
    assert "".join(c.replace("\n\n", "") for c in chunks).replace(" ", "") == text.replace("\n\n", "").replace(" ", "")
