"""Deterministic text keys for claims: tokens, layer and pick keys, slugs, lexical similarity.

Why here and not in the model: two reports that file a decision under "RL algorithms" and "RL
algorithm", or pick "GRPO + DAPO" and "GRPO+DAPO", must meet in the same block and the same key
without an LLM call, and the keys must be identical on every run so that diffs show only real change.
These functions are pure and cheap; they only ever produce keys, never text shown to readers.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

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
    """Equality key of a pick ("GRPO + DAPO" and "grpo+dapo" are the same pick).

    A pick that spells out its own acronym, "Group Relative Policy Optimization (GRPO)" or "GRPO
    (Group Relative Policy Optimization)", is the acronym's pick. An expansion written without its
    acronym is merged by `acronym_aliases`, which needs to see the acronym used elsewhere.
    """
    if not pick:
        return None
    pair = _PARENTHESISED.match(pick.strip())
    if pair is not None:
        outer, inner = pair.group("outer"), pair.group("inner")
        for short, long in ((inner, outer), (outer, inner)):
            if _is_acronym(short) and _base_key(short) in _initials(long):
                return _base_key(short)
    return _base_key(pick)


def _base_key(pick: str) -> str | None:
    parts = _PICK_TOKEN.findall(pick.lower())
    key = re.sub(r"\s*\+\s*", "+", " ".join(parts)).strip(" +")
    return key or None


_PARENTHESISED = re.compile(r"^(?P<outer>[^()]+?)\s*\((?P<inner>[^()]+)\)$")
_ACRONYM = re.compile(r"^[A-Za-z][A-Za-z0-9]{1,9}$")
_FILLER = frozenset(("a", "an", "and", "for", "in", "of", "on", "the", "to", "via", "with"))


def _is_acronym(text: str) -> bool:
    """One short token with at least two capitals and more capitals than lower-case letters ("GRPO", "vLLM")."""
    text = text.strip()
    if not _ACRONYM.fullmatch(text):
        return False
    upper = sum(ch.isupper() for ch in text)
    return upper >= 2 and upper * 2 >= sum(ch.isalpha() for ch in text)


def _initials(phrase: str) -> set[str]:
    """The acronyms a phrase of two or more words can spell: the initials of all its words, and of its
    words without fillers ("of", "for", ...); hyphenated words count as several ("Low-Rank" → "lr")."""
    words = [w for w in re.split(r"[\s-]+", phrase.lower()) if re.search(r"[a-z0-9]", w)]
    if len(words) < 2:
        return set()
    spelled = {"".join(w[0] for w in words), "".join(w[0] for w in words if w not in _FILLER)}
    return {s for s in spelled if len(s) >= 2}


def acronym_aliases(picks: Iterable[str]) -> dict[str, str]:
    """pick key → the key of the acronym it spells out, for every expansion among `picks` whose acronym
    is also among them ("Group Relative Policy Optimization" → "grpo" when some pick is "GRPO").

    Why in code: two reports that name one method differently must meet as one pick, or the synthesis
    shows a "no consensus" between a method and itself. Only an acronym that a pick actually uses
    (capitals, one token) can absorb an expansion, so a phrase is never shortened on a guess; a
    combined pick ("Group Relative Policy Optimization + DAPO") is aliased part by part.
    """
    names = sorted(set(picks))
    acronyms: set[str] = set()
    for name in names:
        for part in re.split(r"\s*\+\s*", name):
            pair = _PARENTHESISED.match(part.strip())
            for token in (part, *(pair.groups() if pair else ())):
                if _is_acronym(token):
                    acronyms.add(token.strip().lower())
    out: dict[str, str] = {}
    for name in names:
        key = pick_key(name)
        if key is None:
            continue
        parts = []
        for part in re.split(r"\s*\+\s*", name):
            part_key = pick_key(part)
            if part_key is None:
                continue
            spelled = sorted(_initials(part) & acronyms) if not _is_acronym(part) and " " in part.strip() else []
            parts.append(spelled[0] if spelled else part_key)
        aliased = "+".join(parts)
        if aliased and aliased != key:
            out[key] = aliased
    return out


_NUMBER = re.compile(r"(?<![\w.-])(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)\s*(%|×|x\b)?")


def quantities(text: str) -> dict[str, frozenset[str]]:
    """The numbers a statement states, by what they count: unit (the word right after the number, or
    `%`/`x`) → values. A number followed by a filler word is filed under the content word before it
    ("reached 50 on AIME" → reached: 50). Years and other bare numbers are filed the same way."""
    out: dict[str, set[str]] = {}
    lowered = text.lower()
    for match in _NUMBER.finditer(lowered):
        value = match.group(1).replace(",", "")
        unit = match.group(2)
        if unit is None:
            after = _TOKEN.match(lowered, _skip_space(lowered, match.end()))
            if after is not None and after.group(0) not in STOPWORDS and not after.group(0).isdigit():
                unit = _stem(after.group(0))
            else:
                before = [t for t in _TOKEN.findall(lowered[: match.start()]) if t not in STOPWORDS and not t.isdigit()]
                unit = _stem(before[-1]) if before else "#"
        unit = "x" if unit == "×" else unit
        out.setdefault(unit, set()).add(value.rstrip("0").rstrip(".") if "." in value else value)
    return {unit: frozenset(values) for unit, values in out.items()}


def _skip_space(text: str, position: int) -> int:
    while position < len(text) and text[position] == " ":
        position += 1
    return position


def numbers_disagree(a: str, b: str) -> bool:
    """Do two statements give different numbers for the same thing ("reaches 50 points" / "only 30
    points")? Such statements are never one agreeing position, whatever a judge says."""
    first, second = quantities(a), quantities(b)
    return any(not (first[unit] & second[unit]) for unit in first.keys() & second.keys())


_PRESENT = re.compile(r"^\s*(today|now|currently|at present)\b\W*$", re.IGNORECASE)


def states_a_condition(condition: str | None) -> bool:
    """Is this a condition at all? "today" or "currently" says when a pick holds now, not what it waits for."""
    return bool(condition) and not _PRESENT.match(condition or "")


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
