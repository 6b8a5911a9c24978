"""One pick, one key: the names reports give one option, merged by code before anything is counted.

Why: real extractors name one option differently from report to report — "vLLM", "vLLM engine",
"vllm-project/vllm", "the vLLM v0.8", "Group Relative Policy Optimization" beside "GRPO" — and file it
under different layers ("rollout engine", "inference engine", "rollout generation"). Counted as several
picks, one recommendation of four families becomes three rows, two of them "single-source". So every
recommendation's pick gets an *identity*, and picks of one identity are one pick (`Claim.alias`, which
`Claim.pick_key` returns) for alignment, clustering, keys and the decision table, whatever their layer.

What code merges (never a guess that could join two options):

* the spelling `text.pick_key` already ignores — case, spacing around `+`, punctuation;
* a repository path or a named owner: "vllm-project/vllm" is "vllm", "Meta's OpenEnv" is "openenv";
* a leading article and a trailing generic word ("engine", "library", "framework", "algorithm", ...):
  "the vLLM engine" is "vllm" — never when nothing else is left ("Engine" stays a pick);
* a `v`-version: "vLLM v0.8.3" is "vllm" (a bare number is part of the name: "Llama 3.1", "Kimi K2.5");
* hyphens and spaces inside a name: "Prime-RL", "prime rl" and "PrimeRL" are one;
* an acronym and its expansion (`text.acronym_aliases`, which needs the acronym used by some pick).

Each pick of a combined pick ("GRPO + DAPO") is resolved part by part. Every pick takes the key of its
identity (`pick_aliases`), so a pick is keyed alike however a report spells it, as a function of the
names alone. What code cannot
tell — "Hugging Face TRL" and "TRL", "PostgreSQL" and "Postgres" — it leaves to the alignment judge, which
sees such candidate aliases together across layers (`judge.candidate_edges`) and may put them in one
position.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import replace

from research_dispatch.synthesis.common.text import acronym_aliases, pick_key
from research_dispatch.synthesis.extract.claims import Claim

GENERIC_WORDS = frozenset((
    "algorithm", "approach", "engine", "framework", "library", "lib", "method", "optimiser", "optimizer", "package",
    "project", "technique", "tool", "toolkit"))
_ARTICLES = frozenset(("a", "an", "the"))
_REPOSITORY = re.compile(r"^[A-Za-z0-9_.-]+/(?P<name>[A-Za-z0-9_.-]+)$")
_OWNER = re.compile(r"^[A-Z][\w.-]*(?:\s+[A-Z][\w.-]*){0,2}['’]s\s+(?=\S)")  # "Meta's", "Prime Intellect's"
_VERSION = re.compile(r"\s+v\d+(?:\.\d+)*\s*$", re.IGNORECASE)
_SPLIT_PLUS = re.compile(r"\s*\+\s*")


def _part_key(part: str) -> str | None:
    """The key of one (non-combined) pick without what does not name the option ("the vLLM engine" →
    "vllm"), its words still apart ("prime rl")."""
    text = _OWNER.sub("", part.strip())
    repository = _REPOSITORY.match(text)
    if repository is not None:
        text = repository.group("name")
    text = _VERSION.sub("", text)
    key = pick_key(text)
    if key is None:
        return None
    words = key.split(" ")
    while len(words) > 1 and words[0] in _ARTICLES:
        words = words[1:]
    while len(words) > 1 and words[-1] in GENERIC_WORDS:
        words = words[:-1]
    return " ".join(words)


def normal_key(pick: str) -> str | None:
    """A pick's key without what does not name the option: "vllm-project/vllm", "the vLLM engine" and
    "vLLM v0.8" are "vllm"; combined picks part by part ("grpo+dapo")."""
    parts = [_part_key(part) for part in _SPLIT_PLUS.split(pick)]
    joined = "+".join(p for p in parts if p)
    return joined or None


def identity(pick: str) -> str | None:
    """What makes two names one pick: their `normal_key` with no space inside a name ("Prime-RL",
    "prime rl" and "PrimeRL" are "primerl")."""
    key = normal_key(pick)
    return key.replace(" ", "") if key else None


def pick_aliases(picks: Iterable[str]) -> dict[str, str]:
    """pick key → the key of its pick, for every pick among `picks` whose key is not already that: one
    key per identity, the most spelled-out `normal_key` of its names (most words, then alphabetical), an
    expansion taking its acronym's. A function of the set of names only: their order does not matter."""
    names = sorted({p for p in picks if pick_key(p)})
    acronyms = acronym_aliases(names)
    normal: dict[str, str] = {}
    for name in names:
        key = pick_key(name) or ""
        normal[key] = normal_key(acronyms.get(key) or name) or key  # an expansion is its acronym
    by_identity: dict[str, list[str]] = defaultdict(list)
    for norm in normal.values():
        by_identity[norm.replace(" ", "")].append(norm)
    chosen = {same: sorted(norms, key=lambda n: (-n.count(" "), n))[0] for same, norms in by_identity.items()}
    out = {key: chosen[norm.replace(" ", "")] for key, norm in sorted(normal.items())}
    return {key: value for key, value in out.items() if value != key}


def with_aliases(claims: list[Claim]) -> list[Claim]:
    """The claims with `alias` set where their pick is another name of a pick some claim uses, so that
    every name of one option is one pick for alignment, clustering, keys and the decision table."""
    aliases = pick_aliases(c.pick for c in claims if c.stance == "recommend" and c.pick)
    out = []
    for claim in claims:
        own = pick_key(claim.pick) if claim.stance == "recommend" else None
        alias = aliases.get(own) if own is not None else None
        out.append(replace(claim, alias=alias) if alias != claim.alias else claim)
    return out
