"""Rank page chunks against a query, so extracted pages reach the model as their relevant parts.

A 12,000-character page sent whole costs ~3,000 prompt tokens on every later turn of the loop. Split
into paragraph-aligned chunks and scored with BM25 against what the researcher is looking for, the
best few chunks (kept in page order) carry nearly all of the evidence for a fraction of the tokens.
Pure functions; no I/O.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

_WORD = re.compile(r"[a-z0-9]+(?:[.+-][a-z0-9]+)*")
STOPWORDS = frozenset({
    "a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "has", "have", "in", "is", "it", "its",
    "of", "on", "or", "that", "the", "this", "to", "was", "were", "which", "with", "what", "how", "why",
    "when", "who", "we", "you", "your", "our", "their", "they", "them", "these", "those", "than", "then",
    "there", "into", "about", "over", "can", "could", "should", "would", "will", "may", "might", "not",
    "no", "do", "does", "did", "done", "such", "also", "more", "most", "other",
})


def tokens(text: str) -> list[str]:
    return [t for t in _WORD.findall(text.lower()) if t not in STOPWORDS and len(t) > 1]


def split_chunks(text: str, target_chars: int = 700) -> list[str]:
    """Split on blank lines, merging short paragraphs and cutting long ones at sentence ends."""
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", text) if p.strip()]
    pieces: list[str] = []
    for paragraph in paragraphs:
        while len(paragraph) > target_chars * 1.5:
            cut = paragraph.rfind(". ", 0, target_chars)
            cut = cut + 1 if cut > target_chars // 3 else target_chars
            pieces.append(paragraph[:cut].strip())
            paragraph = paragraph[cut:].strip()
        if paragraph:
            pieces.append(paragraph)
    chunks: list[str] = []
    current = ""
    for piece in pieces:
        if current and len(current) + len(piece) + 2 > target_chars:
            chunks.append(current)
            current = piece
        else:
            current = f"{current}\n\n{piece}" if current else piece
    if current:
        chunks.append(current)
    return chunks


def bm25_scores(query: str, chunks: list[str], k1: float = 1.4, b: float = 0.75) -> list[float]:
    query_terms = set(tokens(query))
    if not query_terms or not chunks:
        return [0.0] * len(chunks)
    docs = [tokens(c) for c in chunks]
    avg_len = sum(len(d) for d in docs) / len(docs) or 1.0
    doc_freq = Counter(term for d in docs for term in set(d))
    n = len(docs)
    scores = []
    for doc in docs:
        counts = Counter(doc)
        score = 0.0
        for term in query_terms:
            tf = counts.get(term, 0)
            if not tf:
                continue
            idf = math.log(1 + (n - doc_freq[term] + 0.5) / (doc_freq[term] + 0.5))
            score += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len(doc) / avg_len))
        scores.append(score)
    return scores


@dataclass(frozen=True)
class Selection:
    """What `select_chunks` kept of a page."""

    excerpt: str  # the kept chunks in page order, gaps marked "[…]"; "" when nothing new is left
    keys: frozenset[str]  # `chunk_key` of every kept chunk
    kept: int
    total: int
    skipped: int  # chunks left out because they were shown before (in `skip`)
    passages: tuple[str, ...] = ()  # the kept chunks themselves, in page order: what the leg's evidence keeps


_LINK = re.compile(r"\[[^\]\n]*\]\([^)\s]*\)|https?://\S+")


def link_share(chunk: str) -> float:
    """The share of a chunk's characters inside links: a reference or navigation list names many
    relevant terms but carries little evidence, so its relevance score is discounted by this share."""
    if not chunk:
        return 0.0
    return min(1.0, sum(len(m.group(0)) for m in _LINK.finditer(chunk)) / len(chunk))


def chunk_key(chunk: str) -> str:
    """A chunk's identity, insensitive to whitespace (to skip what a leg has already shown)."""
    return hashlib.sha256(" ".join(chunk.split()).encode("utf-8")).hexdigest()[:16]


def select_chunks(text: str, query: str, budget_chars: int, *, skip: frozenset[str] | set[str] = frozenset(),
                  target_chars: int = 700) -> Selection:
    """The most relevant chunks of `text` not in `skip`, within `budget_chars`, in page order.

    A page that fits the budget (and has nothing in `skip`) comes back whole. Chunks are joined with a
    visible elision marker so the model knows text was left out.
    """
    chunks = split_chunks(text, target_chars) or ([text] if text.strip() else [])
    keys = [chunk_key(c) for c in chunks]
    fresh = [i for i, key in enumerate(keys) if key not in skip]
    skipped = len(chunks) - len(fresh)
    if not skipped and len(text) <= budget_chars:
        return Selection(text, frozenset(keys), len(chunks), len(chunks), 0, tuple(chunks))
    if not fresh:
        return Selection("", frozenset(), 0, len(chunks), skipped)
    scores = [score * (1.0 - link_share(chunks[i])) for score, i in
              zip(bm25_scores(query, [chunks[i] for i in fresh]), fresh, strict=True)]
    order = [fresh[j] for j in sorted(range(len(fresh)), key=lambda j: (-scores[j], fresh[j]))]
    chosen: list[int] = []
    used = 0
    for index in order:
        size = len(chunks[index]) + 5
        if used + size > budget_chars:
            continue
        chosen.append(index)
        used += size
    if not chosen:
        first = order[0]
        cut = chunks[first][:budget_chars]
        return Selection(cut, frozenset({keys[first]}), 1, len(chunks), skipped, (cut,))
    chosen.sort()
    parts: list[str] = []
    previous = -1
    for index in chosen:
        if index != previous + 1:
            parts.append("[…]")
        parts.append(chunks[index])
        previous = index
    if previous != len(chunks) - 1:
        parts.append("[…]")
    return Selection("\n\n".join(parts), frozenset(keys[i] for i in chosen), len(chosen), len(chunks), skipped,
                     tuple(chunks[i] for i in chosen))


def best_chunks(text: str, query: str, budget_chars: int, target_chars: int = 700) -> tuple[str, int, int]:
    """The most relevant chunks of `text` within `budget_chars`, in page order: (excerpt, kept, total)."""
    if len(text) <= budget_chars:
        return text, 1, 1
    selection = select_chunks(text, query, budget_chars, target_chars=target_chars)
    return selection.excerpt, selection.kept, selection.total


_SENTENCE_END = re.compile(r"[.!?][\"')\]]?\s")


def lead(text: str, limit: int) -> str:
    """The opening of `text` within `limit` characters, whitespace collapsed, cut at a sentence end when
    one falls in the second half of the limit, else at a word boundary with an ellipsis."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    ends = [m.end() for m in _SENTENCE_END.finditer(text, 0, limit + 1)]
    if ends and ends[-1] > limit // 2:
        return text[: ends[-1]].rstrip()
    cut = text.rfind(" ", 0, limit)
    return text[: cut if cut > limit // 2 else limit - 1].rstrip(" ,;:") + "…"


def query_for(*texts: Iterable[str] | str) -> str:
    """Join several query sources (explicit query, recent searches, the topic) into one string."""
    flat: list[str] = []
    for item in texts:
        if isinstance(item, str):
            flat.append(item)
        else:
            flat.extend(item)
    return " ".join(t for t in flat if t)
