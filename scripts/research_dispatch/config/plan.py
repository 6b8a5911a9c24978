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
from research_dispatch.config.topics import TopicFile, effective
from research_dispatch.core.errors import BadInput, Problem
from research_dispatch.core.gitref import valid_branch_name

MAX_MATRIX_ENTRIES = 256
REPORT_SUFFIX = ".md"
CALLS_SUFFIX = ".calls.jsonl"
EVIDENCE_SUFFIX = ".evidence.jsonl"
_CYCLE = re.compile(r"\d{4}-H[12]|[A-Za-z0-9][A-Za-z0-9._-]{0,39}")
# GitHub-hosted runners end any job after 6 hours, whatever its `timeout-minutes` says.
JOB_LIMIT_MINUTES = 360
# Around the legs, a research job checks out, installs, exports and uploads; a synthesize job also
# collects, verifies, previews the PR and uploads. Ten minutes holds all of that on a hosted runner
# (a typical job spends two to three minutes on it), so the job's timeout never cuts a leg or a
# synthesis that is still within its own cap.
JOB_MARGIN_MINUTES = 10


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
    """Expand topics into legs, optionally keeping only the given model slugs.

    Two legs whose report paths coincide are refused here (`path_conflicts`), whatever the selection:
    otherwise both would be paid for and one report would overwrite the other."""
    every = expand(topics, settings)
    require_unique_paths(every, settings)
    given = list(models or [])
    wanted = {m.strip() for m in given if m.strip()}
    if given and not wanted:
        raise BadInput("the selection names no model (only separators or spaces); leave the option out for "
                       "all models", path="--models")
    legs = [leg for leg in every if not wanted or leg.route.model in wanted]
    unknown = wanted - {leg.route.model for leg in every}
    if unknown:
        raise BadInput(f"no selected topic routes to model(s): {', '.join(sorted(unknown))}", path="--models")
    return legs


def expand(topics: Iterable[TopicFile], settings: Settings) -> list[Leg]:
    """Every leg of these topics, unchecked (`plan_legs` is the checked form)."""
    return [Leg(topic_file=topic_file, route=route, stem=topic_file.report_stem(route),
                family=settings.family_of(route.model))
            for topic_file in sorted(topics, key=lambda t: t.stem) for route in topic_file.topic.models]


def _where(leg: Leg) -> str:
    return f"{leg.topic_file.relpath} models[{leg.topic.models.index(leg.route)}] ({leg.route.model})"


def path_conflicts(legs: Iterable[Leg], settings: Settings) -> list[BadInput]:
    """Legs whose computed report paths coincide, one problem per extra leg naming both topic files.

    A stem is `NN-<id>` or `NN-<id>.<author>-<name>`, so different inputs can meet: models
    `openai-x/gpt-5` and `openai/x-gpt-5` of one topic, or topic `a` with model `openai/gpt-5` beside a
    topic whose id is `a.openai-gpt-5`. Paths are never read from input, so the only remedy is to rename."""
    first: dict[str, Leg] = {}
    problems: list[BadInput] = []
    for leg in legs:
        other = first.setdefault(leg.stem, leg)
        if other is leg:
            continue
        problems.append(BadInput(
            f"its report path {leg.report_relpath(settings)} is also computed for {_where(other)}, so one report "
            f"would overwrite the other after both were paid for; rename a topic id or change one model",
            path=leg.topic_file.relpath, field=f"models[{leg.topic.models.index(leg.route)}]"))
    return problems


def plan_problems(topics: Iterable[TopicFile], settings: Settings) -> tuple[list[Leg], list[BadInput]]:
    """The whole plan and what is wrong across its legs, every problem at once (`check`): report paths
    that coincide, and time caps no GitHub-hosted job can hold."""
    legs = expand(topics, settings)
    return legs, path_conflicts(legs, settings) + job_time_problems(legs, settings)


SYNTHESIS_TABLE = "tool.research-dispatch.synthesis"


def _families(legs: Iterable[Leg]) -> dict[str, list[Leg]]:
    by_family: dict[str, list[Leg]] = {}
    for leg in legs:
        by_family.setdefault(leg.family, []).append(leg)
    return by_family


def judge_problems(legs: Iterable[Leg], settings: Settings) -> list[BadInput]:
    """Report families that no judge of another family can check (DESIGN: exit 2 naming
    `synthesis.judge_models`), one problem per family and judge list.

    Why before any leg: a claim counts only through a citation that a judge of another family than the
    report's confirmed, and the alignment judge must not be an author of what it aligns. With every judge
    of a report's family, the synthesis finds out after the legs are paid: that report's citations are
    never checked, its claims never count, and a convergence of two families shows as single-source. The
    citation judges are `citation_models` when set, else `judge_models` (as the synthesis chooses them)."""
    syn = settings.synthesis
    lists = [("judge_models", syn.judge_models)]
    if syn.citation_models:
        lists.append(("citation_models", syn.citation_models))
    problems: list[BadInput] = []
    for name, judges in lists:
        judge_families = {settings.family_of(judge) for judge in judges}
        for family, members in sorted(_families(legs).items()):
            if judge_families - {family}:
                continue
            topics = ", ".join(sorted({leg.topic_file.relpath for leg in members}))
            problems.append(BadInput(
                f"no judge can check the reports of the {family} family ({topics}): every judge "
                f"({', '.join(judges)}) is of that family, and a judge must be of another; add a judge of another "
                f"family", path="pyproject.toml", field=f"{SYNTHESIS_TABLE}.{name}"))
    return problems


def judge_warnings(legs: Iterable[Leg], settings: Settings) -> list[Problem]:
    """A judge list whose every model is of a report family, when reports of several families are planned:
    a judge batch that holds claims of all of them is judged by one of their authors (`choose_judge`)."""
    families = set(_families(legs))
    judges = settings.synthesis.judge_models
    if len(families) < 2 or {settings.family_of(judge) for judge in judges} - families:
        return []
    return [Problem("pyproject.toml", f"{SYNTHESIS_TABLE}.judge_models",
                    f"every judge ({', '.join(judges)}) is of a family that writes reports "
                    f"({', '.join(sorted(families))}): claims of those families judged together are aligned by "
                    "one of their authors; a judge of a third family avoids that")]


def family_warnings(legs: Iterable[Leg]) -> list[Problem]:
    """Topics whose two or more models are all of one family: their reports can never converge with each
    other (convergence needs independent families), which the topic's author rarely means."""
    by_topic: dict[str, list[Leg]] = {}
    for leg in legs:
        by_topic.setdefault(leg.topic_file.relpath, []).append(leg)
    warnings = []
    for relpath, members in sorted(by_topic.items()):
        families = {leg.family for leg in members}
        if len(members) > 1 and len(families) == 1:
            warnings.append(Problem(relpath, "models", f"all {len(members)} models of topic "
                                    f"{members[0].topic.id!r} are of the {families.pop()} family, so its reports "
                                    "cannot confirm each other (convergence needs two families); route one to "
                                    "another family"))
    return warnings


def require_unique_paths(legs: Iterable[Leg], settings: Settings) -> None:
    """`path_conflicts`, the first one raised (exit 2 before any work)."""
    conflicts = path_conflicts(legs, settings)
    if conflicts:
        raise conflicts[0]


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
        legs += [leg for leg in expand([topic_file], settings) if leg.route in routes]
    return legs


def batches(legs: list[Leg], max_entries: int = MAX_MATRIX_ENTRIES) -> list[list[Leg]]:
    """The legs of each matrix entry: one each up to `max_entries`, else packed in consecutive batches."""
    size = 1 if len(legs) <= max_entries else math.ceil(len(legs) / max_entries)
    return [legs[i:i + size] for i in range(0, len(legs), size)]


def matrix(legs: list[Leg], max_entries: int = MAX_MATRIX_ENTRIES) -> dict[str, list[dict[str, str]]]:
    """The Actions matrix. Up to `max_entries` legs map one to one; beyond, legs are packed into batches."""
    if len(legs) <= max_entries:
        return {"include": [{"leg": leg.stem, "topic": leg.topic.id, "model": leg.route.model} for leg in legs]}
    packed = batches(legs, max_entries)
    width = len(str(len(packed)))
    include = []
    for number, batch in enumerate(packed, start=1):
        include.append({
            "leg": f"batch-{number:0{width}d}-of-{len(packed)}",
            "topic": ",".join(leg.topic.id for leg in batch),
            "model": ",".join(leg.route.model for leg in batch),
        })
    return {"include": include}


def _entry_minutes(batch: list[Leg], settings: Settings) -> float:
    """The time caps of a matrix entry's legs, which one job runs one after the other."""
    return sum(effective(leg.topic, settings)[1].timeout_minutes for leg in batch)


def research_job_minutes(legs: list[Leg], settings: Settings) -> int:
    """`timeout-minutes` of the research job: its longest matrix entry (a leg, or a packed batch's legs in
    turn) at their `budget.timeout_minutes`, plus the job's margin — derived, so a leg within its cap is
    never killed by the job, and a hung job still ends."""
    longest = max((_entry_minutes(batch, settings) for batch in batches(legs)), default=0.0)
    return math.ceil(longest + JOB_MARGIN_MINUTES)


def synthesize_job_minutes(settings: Settings) -> int:
    """`timeout-minutes` of the synthesize job: the synthesis cap plus the job's margin."""
    return math.ceil(settings.synthesis.timeout_minutes + JOB_MARGIN_MINUTES)


def job_time_problems(legs: list[Leg], settings: Settings) -> list[BadInput]:
    """Caps that no GitHub-hosted job can hold (6 h), one problem per topic file or setting."""
    problems: list[BadInput] = []
    room = JOB_LIMIT_MINUTES - JOB_MARGIN_MINUTES
    for batch in batches(legs):
        minutes = _entry_minutes(batch, settings)
        if minutes <= room:
            continue
        leg = max(batch, key=lambda item: effective(item.topic, settings)[1].timeout_minutes)
        own = leg.topic.budget is not None and "timeout_minutes" in leg.topic.budget.model_fields_set
        path, field = (leg.topic_file.relpath, "budget.timeout_minutes") if own else \
            ("pyproject.toml", "tool.research-dispatch.budget.timeout_minutes")
        what = f"{leg.stem} needs" if len(batch) == 1 else f"the packed batch with {leg.stem} ({len(batch)} legs) needs"
        problems.append(BadInput(f"{what} {minutes:g} minutes plus the research job's {JOB_MARGIN_MINUTES}-minute "
                                 f"margin, above the {JOB_LIMIT_MINUTES} minutes a GitHub-hosted job can run; lower "
                                 f"it to at most {room:g} minutes per job", path=path, field=field))
    synthesis = settings.synthesis.timeout_minutes
    if synthesis > room:
        problems.append(BadInput(f"{synthesis:g} minutes plus the synthesize job's {JOB_MARGIN_MINUTES}-minute margin "
                                 f"is above the {JOB_LIMIT_MINUTES} minutes a GitHub-hosted job can run; lower it to "
                                 f"at most {room:g}", path="pyproject.toml",
                                 field="tool.research-dispatch.synthesis.timeout_minutes"))
    return problems


def current_cycle(now: dt.datetime | None = None) -> str:
    """The refresh cycle of a date: YYYY-H1 (January–June) or YYYY-H2 (July–December)."""
    now = now or dt.datetime.now(dt.timezone.utc)
    return f"{now.year}-H{1 if now.month <= 6 else 2}"


def validate_cycle(value: str) -> str:
    """A cycle id: `YYYY-H1`/`YYYY-H2` or a short name that is also a valid last part of a branch name
    (`refresh_branch` checks the whole branch with git's rules)."""
    if not _CYCLE.fullmatch(value) or not valid_branch_name(value):
        raise BadInput(f"invalid cycle {value!r} (expected YYYY-H1 or YYYY-H2, or a short name of letters, digits, "
                       "'.', '_' and '-' that git accepts in a branch name: no '..', no trailing '.' or '.lock')",
                       path="--cycle")
    return value


def refresh_branch(settings: Settings, cycle: str) -> str:
    """The refresh branch a cycle names (`<pr.branch_prefix><cycle>`), checked with git's own rules
    before any work: a name git refuses would otherwise fail the publish after every leg was paid."""
    branch = f"{settings.pr.branch_prefix}{validate_cycle(cycle)}"
    if not valid_branch_name(branch):
        raise BadInput(f"cycle {cycle!r} makes the branch name {branch!r}, which git refuses "
                       "(git check-ref-format)", path="--cycle")
    return branch


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
