"""Deterministic text keys for claims: tokens, layer and pick keys, slugs, lexical similarity.

Why here and not in the model: two reports that file a decision under "RL algorithms" and "RL
algorithm", or pick "GRPO + DAPO" and "GRPO+DAPO", must meet in the same block and the same key
without an LLM call, and the keys must be identical on every run so that diffs show only real change.
These functions are pure and cheap; they only ever produce keys, never text shown to readers.
"""

from __future__ import annotations

import hashlib
import re

_TOKEN = re.compile(r"[a-z0-9]+")
_PICK_TOKEN = re.compile(r"[a-z0-9+]+")
_BRITISH = re.compile(r"(?<=[a-z]{3})is(e|ed|es|ing|ation|ations)$")
STOPWORDS = frozenset(("a", "about", "across", "after", "all", "also", "an", "and", "any", "are", "as", "at", "be",
    "because", "been", "being", "both", "but", "by", "can", "could", "do", "does", "each", "for", "from", "had",
    "has", "have", "how", "in", "into", "is", "it", "its", "more", "most", "much", "not", "of", "on", "only", "or",
    "other", "our", "over", "per", "same", "should", "so", "some", "still", "such", "than", "that", "the", "their",
    "them", "then", "there", "these", "this", "those", "to", "under", "up", "very", "via", "was", "we", "were",
    "what", "when", "where", "which", "while", "who", "why", "will", "with", "within", "without", "would", "you",
    "your"))


def _stem(token: str) -> str:
    """A very light stemmer: British -ise spellings to -ize, and a plural `s` dropped."""
    if len(token) > 5:
        token = _BRITISH.sub(lambda m: "iz" + m.group(1), token)
    if len(token) > 3 and token.endswith("s") and not token.endswith(("ss", "us", "is")):
        token = token[:-1]
    return token


def tokens(text: str) -> list[str]:
    """Content tokens in order: lower case, alphanumeric runs, stop words removed, lightly stemmed."""
    return [_stem(t) for t in _TOKEN.findall(text.lower()) if t not in STOPWORDS]


def token_set(text: str) -> frozenset[str]:
    return frozenset(tokens(text))


def layer_key(layer: str) -> str:
    """The blocking key of a layer name ("Decentralised substrates" -> "decentralized substrate")."""
    return " ".join(tokens(layer)) or "general"


def pick_key(pick: str | None) -> str | None:
    """Equality key of a pick ("GRPO + DAPO" and "grpo+dapo" are the same pick)."""
    if not pick:
        return None
    parts = _PICK_TOKEN.findall(pick.lower())
    key = re.sub(r"\s*\+\s*", "+", " ".join(parts)).strip(" +")
    return key or None


def statement_key(statement: str) -> str:
    """Equality key of a statement: whitespace, case and punctuation do not matter."""
    return " ".join(_TOKEN.findall(statement.lower()))


def slug(text: str, *, max_len: int = 40) -> str:
    """`[a-z0-9-]` only, cut on a word boundary; safe in keys, anchors and file-free identifiers."""
    value = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    if len(value) > max_len:
        value = value[:max_len].rsplit("-", 1)[0] or value[:max_len]
    return value or "x"


def words_slug(statement: str, *, count: int = 5) -> str:
    """The first few distinct content words of a statement, as a slug (names descriptive clusters)."""
    picked: list[str] = []
    for token in _TOKEN.findall(statement.lower()):
        if token in STOPWORDS or token in picked:
            continue
        picked.append(token)
        if len(picked) == count:
            break
    return slug("-".join(picked) or "claim")


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a or not b:
        return 0.0
    shared = len(a & b)
    return shared / (len(a) + len(b) - shared)


def short_hash(*parts: str, length: int = 10) -> str:
    digest = hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()
    return digest[:length]


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
