"""Legs (one per topic × model) and the GitHub Actions matrix built from them.

A matrix entry is `{"leg", "topic", "model"}`. GitHub caps a matrix at 256 jobs, so larger plans are
packed: an entry then carries comma-separated `topic` and `model` lists (paired by position) that the
`research` command runs as one batch, and `leg` names the batch.
"""

from __future__ import annotations

import datetime as dt
import difflib
import json
import math
import re
import secrets
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from research_dispatch.config.settings import ModelRoute, Settings, Topic
from research_dispatch.config.topics import TopicFile
from research_dispatch.core.errors import BadInput

MAX_MATRIX_ENTRIES = 256
REPORT_SUFFIX = ".md"
CALLS_SUFFIX = ".calls.jsonl"
EVIDENCE_SUFFIX = ".evidence.jsonl"


@dataclass(frozen=True)
class Companions:
    """The files that travel with a report, wherever it goes (written, committed, collected, moved aside,
    removed): its call log (the route's evidence) and its evidence file (what the researcher was shown)."""

    calls: str
    evidence: str

    def __iter__(self) -> Iterator[str]:
        return iter((self.calls, self.evidence))


def companions(report_relpath: str) -> Companions:
    """`<dir>/<stem>.md` → its call log and evidence file beside it (the one place these names are made)."""
    base = report_relpath[: -len(REPORT_SUFFIX)] if report_relpath.endswith(REPORT_SUFFIX) else report_relpath
    return Companions(calls=base + CALLS_SUFFIX, evidence=base + EVIDENCE_SUFFIX)


@dataclass(frozen=True)
class Leg:
    """One researcher run: a topic routed to one model. All paths are computed here."""

    topic_file: TopicFile
    route: ModelRoute
    stem: str
    family: str

    @property
    def topic(self) -> Topic:
        return self.topic_file.topic

    def report_relpath(self, settings: Settings) -> str:
        return f"{settings.research_dir}/{self.stem}{REPORT_SUFFIX}"

    def calls_relpath(self, settings: Settings) -> str:
        return companions(self.report_relpath(settings)).calls

    def evidence_relpath(self, settings: Settings) -> str:
        return companions(self.report_relpath(settings)).evidence

    def unit_relpaths(self, settings: Settings) -> tuple[str, ...]:
        """The report and its companions, in `write_unit` order (companions first, the report last)."""
        report = self.report_relpath(settings)
        return (*companions(report), report)

    def trace_relpath(self, settings: Settings) -> str:
        return f"{settings.build_dir}/traces/{self.stem}.jsonl"

    def status_relpath(self, settings: Settings) -> str:
        return f"{settings.build_dir}/legs/{self.stem}.json"


def plan_legs(topics: Iterable[TopicFile], settings: Settings, models: Iterable[str] | None = None) -> list[Leg]:
    """Expand topics into legs, optionally keeping only the given model slugs."""
    given = list(models or [])
    wanted = {m.strip() for m in given if m.strip()}
    if given and not wanted:
        raise BadInput("the selection names no model (only separators or spaces); leave the option out for "
                       "all models", path="--models")
    legs: list[Leg] = []
    seen_models: set[str] = set()
    for topic_file in sorted(topics, key=lambda t: t.stem):
        for route in topic_file.topic.models:
            seen_models.add(route.model)
            if wanted and route.model not in wanted:
                continue
            legs.append(Leg(topic_file=topic_file, route=route, stem=topic_file.report_stem(route),
                            family=settings.family_of(route.model)))
    unknown = wanted - seen_models
    if unknown:
        raise BadInput(f"no selected topic routes to model(s): {', '.join(sorted(unknown))}", path="--models")
    return legs


def resolve_legs(topics: list[TopicFile], settings: Settings, topic_arg: str, model_arg: str | None) -> list[Leg]:
    """Resolve `research TOPIC [--model SLUG]`, including packed batches ("a,b" with "m1,m2")."""
    topic_ids = [t.strip() for t in topic_arg.split(",") if t.strip()]
    model_ids = [m.strip() for m in model_arg.split(",")] if model_arg else []
    if not topic_ids:
        raise BadInput("no topic id given", path="TOPIC")
    if model_ids and len(model_ids) != len(topic_ids):
        if len(topic_ids) == 1:
            topic_ids = topic_ids * len(model_ids)
        else:
            raise BadInput(f"{len(topic_ids)} topics but {len(model_ids)} models; they pair by position",
                           path="--model")
    by_id = {t.topic.id: t for t in topics}
    legs: list[Leg] = []
    for index, topic_id in enumerate(topic_ids):
        topic_file = by_id.get(topic_id)
        if topic_file is None:
            near = difflib.get_close_matches(topic_id, sorted(by_id), n=1, cutoff=0.6)
            hint = f"did you mean {near[0]!r}? " if near else ""
            raise BadInput(f"unknown topic id {topic_id!r}; {hint}the topics are: {', '.join(sorted(by_id)) or 'none'}",
                           path="TOPIC")
        routes = topic_file.topic.models
        if model_ids:
            routes = tuple(r for r in routes if r.model == model_ids[index])
            if not routes:
                raise BadInput(f"topic {topic_id!r} has no route to {model_ids[index]!r}",
                               path=topic_file.relpath, field="models")
        for route in routes:
            legs.append(Leg(topic_file=topic_file, route=route, stem=topic_file.report_stem(route),
                            family=settings.family_of(route.model)))
    return legs


def matrix(legs: list[Leg], max_entries: int = MAX_MATRIX_ENTRIES) -> dict[str, list[dict[str, str]]]:
    """The Actions matrix. Up to `max_entries` legs map one to one; beyond, legs are packed into batches."""
    if len(legs) <= max_entries:
        return {"include": [{"leg": leg.stem, "topic": leg.topic.id, "model": leg.route.model} for leg in legs]}
    size = math.ceil(len(legs) / max_entries)
    batches = [legs[i:i + size] for i in range(0, len(legs), size)]
    width = len(str(len(batches)))
    include = []
    for number, batch in enumerate(batches, start=1):
        include.append({
            "leg": f"batch-{number:0{width}d}-of-{len(batches)}",
            "topic": ",".join(leg.topic.id for leg in batch),
            "model": ",".join(leg.route.model for leg in batch),
        })
    return {"include": include}


def current_cycle(now: dt.datetime | None = None) -> str:
    """The refresh cycle of a date: YYYY-H1 (January–June) or YYYY-H2 (July–December)."""
    now = now or dt.datetime.now(dt.timezone.utc)
    return f"{now.year}-H{1 if now.month <= 6 else 2}"


def validate_cycle(value: str) -> str:
    if not re.fullmatch(r"\d{4}-H[12]|[A-Za-z0-9][A-Za-z0-9._-]{0,39}", value) or ".." in value:
        raise BadInput(f"invalid cycle {value!r} (expected YYYY-H1 or YYYY-H2, or a short name)", path="--cycle")
    return value


def write_github_output(path: Path, outputs: dict[str, str]) -> None:
    """Append outputs with random heredoc delimiters, so no value can end its own block early.

    One append of the whole block: a failure leaves either all outputs or none. The caller checks the
    file up front (`ghactions.require_runner_file`); an error here still names the variable."""
    blocks = []
    for key, value in outputs.items():
        delimiter = f"EOF_{secrets.token_hex(8)}"
        while delimiter in value:
            delimiter = f"EOF_{secrets.token_hex(8)}"
        blocks.append(f"{key}<<{delimiter}\n{value}\n{delimiter}\n")
    try:
        with path.open("a", encoding="utf-8") as handle:
            handle.write("".join(blocks))
    except OSError as exc:
        raise BadInput(f"cannot append to {str(path)!r}: {exc.strerror or exc}", path="environment",
                       field="GITHUB_OUTPUT") from None


def matrix_json(legs: list[Leg]) -> str:
    return json.dumps(matrix(legs), separators=(",", ":"), sort_keys=True)
