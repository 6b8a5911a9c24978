"""Where a leg stands: ONE model (`LegState`) and ONE rule, used by resume, the run summary and publish.

A leg's state is computed from the repository — its report (from the working tree, or from a git tree
such as the cycle's refresh branch), the call log next to it, the leg's status file, the cycle, and the
report's `body_sha256` — by `assess`. The same function decides, when a leg has several reports to
choose from (the working tree's and the refresh branch's), which one is *the newest good report of this
cycle*: the report the branch must hold for that leg. Resume, the run summary, the overlay of the
branch into the working tree, and the publisher all call it, so they can never disagree about a leg.

**Candidates.** A candidate is one report file with its call log and its evidence file (the three
travel together: written, chosen, moved and committed as one). It is *usable* when it parses, its
front matter names this leg's topic and model, and it is not a symbolic link. Its evidence does not
decide anything here (a report without one — written before evidence files existed — is still a
report): what `leg/evidence.py` finds wrong with it is a warning of the assessment. It is *good* when it is
usable, from this cycle, and its status is `ok` or `degraded`. A report whose body no longer matches its
`body_sha256` was *edited by hand* — and so was one whose evidence file is not the one written with it
(its sha256 is not the report's `evidence_sha256`, the report names none, or a symbolic link stands in
its place): an edit to the evidence decides citations as surely as an edit to the body, so it is
treated the same way (never replaced silently, never committed under the model's trailers without
`--allow-edited`; the synthesis does not use that evidence).

**The choice** (`rank`): a hand edit beats any generated report (it is never replaced silently; `run
--fresh` sets it aside in `build/edited/` and lifts this rule, `replace_edited`); then good beats not
good; then, among good reports, one written from the leg's current inputs (`input_hash`) beats one
from older inputs, a verified route beats an unverified one, `ok` beats `degraded` — a refresh never
downgrades what the branch already holds — and finally the newer (`finished_at`, then `started_at`)
wins. Timestamps have one-second resolution: on a tie the working tree's report (this checkout's
latest) wins, then the content hash decides, so every caller picks the same file.

**The state** of a leg is then one of `LegState` (see there). A leg is *complete* (`LegState.complete`)
when it has a good report of this cycle with a verified route, or an accepted hand edit: the pull
request is a draft, labelled `partial` and titled as partial exactly while some planned leg is not.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from research_dispatch.config.plan import Leg
from research_dispatch.config.settings import Settings
from research_dispatch.core.errors import BadInput, DispatchError
from research_dispatch.leg import evidence as evidence_file
from research_dispatch.leg.evidence import MAX_EVIDENCE_BYTES
from research_dispatch.leg.execute import leg_input_hash
from research_dispatch.leg.files import FileWrite
from research_dispatch.leg.report import MAX_REPORT_BYTES, Report, parse_report_text, sha256_of
from research_dispatch.leg.status import LegResult, LegState, read_status
from research_dispatch.leg.verify import RouteRow, parse_calls, verify_records

MAX_CALLS_BYTES = 8 * 1024 * 1024


class Where(str, enum.Enum):
    """Where a candidate report was read from."""

    WORKTREE = "working tree"
    BRANCH = "refresh branch"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Candidate:
    """One report file of a leg with its call log and evidence file, read from the working tree or from
    a git tree."""

    stem: str
    where: Where
    relpath: str
    text: str
    calls_text: str | None
    report: Report | None
    row: RouteRow | None
    problem: str | None = None  # why the report cannot be used at all
    origin: str = ""  # the commit it was read from (branch candidates)
    evidence_text: str | None = None  # None: no evidence file beside the report (its check: `row.evidence`)
    evidence_link: bool = False  # a symbolic link stands where the evidence file belongs (never read)

    @property
    def sha256(self) -> str:
        return sha256_of(self.text)

    def unit(self, leg: Leg, settings: Settings) -> list[FileWrite]:
        """The files of this candidate at the leg's computed paths, as one unit (`legfiles.write_unit`
        order: companions first, the report last); a companion it does not have is left out."""
        companions = [(leg.calls_relpath(settings), self.calls_text),
                      (leg.evidence_relpath(settings), self.evidence_text)]
        return [*(FileWrite(rel, text) for rel, text in companions if text is not None),
                FileWrite(leg.report_relpath(settings), self.text)]

    def same_files(self, other: Candidate) -> bool:
        return (self.text, self.calls_text, self.evidence_text) == (other.text, other.calls_text, other.evidence_text)

    @property
    def usable(self) -> bool:
        return self.problem is None and self.report is not None

    @property
    def edits(self) -> tuple[str, ...]:
        """What was changed by hand after the report was written: its body, its evidence file (see the
        module docstring); empty when nothing was (or the report is not usable)."""
        if not self.usable or self.report is None:
            return ()
        found = []
        if self.report.edited:
            found.append("its body no longer matches body_sha256")
        bound = self.report.meta.evidence_sha256
        if self.evidence_link:
            found.append("a symbolic link stands in place of its evidence file")
        elif self.evidence_text is not None and bound is None:
            found.append("an evidence file lies beside it although it names no evidence_sha256")
        elif self.evidence_text is not None and evidence_file.sha256_text(self.evidence_text) != bound:
            found.append("its evidence file no longer matches evidence_sha256")
        return tuple(found)

    @property
    def edited(self) -> bool:
        return bool(self.edits)

    @property
    def cycle(self) -> str | None:
        return self.report.meta.cycle if self.report is not None else None

    @property
    def route_verified(self) -> bool:
        return self.row is not None and self.row.verified

    @property
    def cost_usd(self) -> float:
        """What the report cost: its model calls (`usage`) and its search services (`search.cost_usd`, since
        issue 32; absent from older reports)."""
        return self.report.meta.cost_usd if self.report is not None else 0.0

    def good(self, cycle: str) -> bool:
        return (self.usable and self.report is not None and self.report.meta.cycle == cycle
                and self.report.meta.status in ("ok", "degraded"))


def read_candidate(leg: Leg, settings: Settings, *, where: Where, text: str, calls_text: str | None,
                   evidence_text: str | None = None, origin: str = "") -> Candidate:
    """Assess one report text (with its call log and evidence texts) as a candidate for `leg`. Never
    raises for bad content: an unusable report is a candidate with a `problem`."""
    relpath = leg.report_relpath(settings)

    def made(report: Report | None, row: RouteRow | None, problem: str | None = None) -> Candidate:
        return Candidate(leg.stem, where, relpath, text, calls_text, report, row, problem=problem, origin=origin,
                         evidence_text=evidence_text)

    try:
        report = parse_report_text(text, display=relpath, path=Path(relpath))
    except BadInput as exc:
        return made(None, None, f"unreadable: {exc}")
    meta = report.meta
    if meta.topic != leg.topic.id or meta.requested_model != leg.route.model:
        return made(report, None, f"front matter names topic {meta.topic!r} and model {meta.requested_model!r}, "
                                  f"not this leg's {leg.topic.id!r} and {leg.route.model!r}")
    try:
        records = parse_calls(calls_text, display=leg.calls_relpath(settings)) if calls_text is not None else None
        row = verify_records(report, records, trust_self_reported=settings.gateway.trust_self_reported)
    except DispatchError as exc:
        return made(report, None, f"call log unreadable: {exc}")
    row.evidence = evidence_file.check(report, evidence_text, relpath=leg.evidence_relpath(settings))
    return made(report, row)


def _companion_text(path: Path, limit: int) -> str | None:
    """A companion file's text (call log, evidence), or None when it is absent, a link, too big or not
    UTF-8: the report is still assessed, and its checks say what is missing."""
    if not path.is_file() or path.is_symlink():
        return None
    try:
        return path.read_bytes().decode("utf-8") if path.stat().st_size <= limit else None
    except (OSError, UnicodeDecodeError):
        return None


def worktree_candidate(repo: Path, settings: Settings, leg: Leg) -> Candidate | None:
    """The working tree's report of a leg, or None when there is none."""
    path = repo / leg.report_relpath(settings)
    relpath = leg.report_relpath(settings)
    if path.is_symlink():  # a link could smuggle any file into a commit under a report's name
        return Candidate(leg.stem, Where.WORKTREE, relpath, "", None, None, None,
                         problem=f"{relpath} is a symbolic link")
    if not path.is_file():
        return None
    evidence_link = (repo / leg.evidence_relpath(settings)).is_symlink()
    try:
        if path.stat().st_size > MAX_REPORT_BYTES:
            raise ValueError(f"larger than {MAX_REPORT_BYTES} bytes")
        text = path.read_bytes().decode("utf-8")
    except (OSError, ValueError) as exc:
        return Candidate(leg.stem, Where.WORKTREE, relpath, "", None, None, None,
                         problem=f"unreadable: {type(exc).__name__}: {exc}")
    candidate = read_candidate(leg, settings, where=Where.WORKTREE, text=text,
                               calls_text=_companion_text(repo / leg.calls_relpath(settings), MAX_CALLS_BYTES),
                               evidence_text=_companion_text(repo / leg.evidence_relpath(settings), MAX_EVIDENCE_BYTES))
    return replace(candidate, evidence_link=True) if evidence_link else candidate


# --------------------------------------------------------------------------------------------------
# The rule


def rank(candidate: Candidate, *, cycle: str, input_hash: str | None, replace_edited: bool = False,
         ) -> tuple[bool, bool, bool, bool, bool, str, str, bool, str]:
    """The sort key of the accumulation rule (see the module docstring): the highest wins."""
    meta = candidate.report.meta if candidate.report is not None else None
    return (candidate.edited and not replace_edited,
            candidate.good(cycle),
            bool(meta is not None and input_hash is not None and meta.input_hash == input_hash),
            candidate.route_verified,
            bool(meta is not None and meta.status == "ok"),
            meta.finished_at if meta is not None else "",
            meta.started_at if meta is not None else "",
            candidate.where is Where.WORKTREE,
            candidate.sha256)


def eligible(candidate: Candidate, cycle: str) -> bool:
    """May this candidate stand for the leg on the branch? Good reports of this cycle and hand edits."""
    return candidate.good(cycle) or candidate.edited


def choose(candidates: Iterable[Candidate | None], *, cycle: str, input_hash: str | None,
           replace_edited: bool = False) -> Candidate | None:
    """The report that stands for the leg: the highest-ranked eligible candidate, or None."""
    pool = [c for c in candidates if c is not None and (eligible(c, cycle) and
                                                        not (replace_edited and c.edited and not c.good(cycle)))]
    if not pool:
        return None
    return max(pool, key=lambda c: rank(c, cycle=cycle, input_hash=input_hash, replace_edited=replace_edited))


@dataclass
class LegAssessment:
    """One planned leg: its state, the report that stands for it (if any), the status of its latest
    attempt, the money it cost, and the reasons to show."""

    leg: Leg
    state: LegState
    chosen: Candidate | None = None
    candidates: list[Candidate] = field(default_factory=list)
    status: LegResult | None = None  # the status file of this cycle's latest attempt (None: none this cycle)
    reasons: list[str] = field(default_factory=list)
    last_attempt_failed: bool = False

    @property
    def warnings(self) -> list[str]:
        """What is wrong with the evidence of the report that stands for the leg (`leg/evidence.py`):
        said, never a reason to redo or refuse the report."""
        return self.row.evidence.warnings if self.row is not None and self.row.evidence is not None else []

    @property
    def stem(self) -> str:
        return self.leg.stem

    @property
    def report(self) -> Report | None:
        return self.chosen.report if self.chosen is not None else None

    @property
    def row(self) -> RouteRow | None:
        return self.chosen.row if self.chosen is not None else None

    @property
    def complete(self) -> bool:
        return self.state.complete

    @property
    def unverified(self) -> bool:
        return self.state is LegState.UNVERIFIED

    @property
    def failed_attempt_cost_usd(self) -> float:
        """Money spent by this cycle's latest attempt when it failed (it produced no report)."""
        return self.status.cost_usd if self.last_attempt_failed and self.status is not None else 0.0

    @property
    def report_cost_usd(self) -> float:
        return self.chosen.cost_usd if self.chosen is not None else 0.0

    @property
    def cost_usd(self) -> float:
        """The report's cost plus a later failed attempt's: every call counts."""
        return round(self.report_cost_usd + self.failed_attempt_cost_usd, 6)


def assess(leg: Leg, candidates: Sequence[Candidate | None], status: LegResult | None, *, cycle: str,
           input_hash: str | None, replace_edited: bool = False) -> LegAssessment:
    """THE function: the state of one leg from its candidate reports and its latest status file."""
    pool = [c for c in candidates if c is not None]
    if status is not None and status.cycle and status.cycle != cycle:
        status = None  # a status file from another cycle says nothing about this one
    chosen = choose(pool, cycle=cycle, input_hash=input_hash, replace_edited=replace_edited)
    result = LegAssessment(leg=leg, state=LegState.MISSING, chosen=chosen, candidates=pool, status=status)
    failed_now = status is not None and status.status == LegState.FAILED
    if failed_now and status is not None:
        result.last_attempt_failed = chosen is None or chosen.report is None or \
            status.started_at >= chosen.report.meta.started_at
    if chosen is not None and chosen.report is not None:
        meta = chosen.report.meta
        if chosen.edited:
            result.state = LegState.EDITED
            result.reasons.append(f"{chosen.relpath} was edited by hand ({'; '.join(chosen.edits)})")
        elif chosen.route_verified:
            result.state = LegState.OK if meta.status == "ok" else LegState.DEGRADED
        else:
            result.state = LegState.UNVERIFIED
        if meta.status == "degraded":
            result.reasons += list(meta.status_reasons)
        if chosen.row is not None:
            result.reasons += [f"route check: {problem}" for problem in chosen.row.problems]
        if result.last_attempt_failed and status is not None:
            result.reasons += _attempt_reasons(status)
            result.reasons.append(f"the latest attempt failed; the report of {meta.finished_at} is kept")
        return result
    unusable = [c for c in pool if not c.usable]
    if failed_now and status is not None:
        result.state = LegState.FAILED
        result.reasons = _attempt_reasons(status)
    elif unusable:
        result.state = LegState.INVALID
    elif pool:
        result.state = LegState.STALE
    else:
        result.state = LegState.MISSING
        result.reasons.append("no report and no attempt this cycle: the leg did not run or its artefact is missing")
    for candidate in unusable:
        result.reasons.append(f"report not usable ({candidate.where}): {candidate.problem}")
    for candidate in pool:
        if candidate.usable and candidate.report is not None and not candidate.good(cycle):
            meta = candidate.report.meta
            what = f"of cycle {meta.cycle or 'unknown'}" if meta.cycle != cycle else f"with status {meta.status}"
            result.reasons.append(f"only a report {what} ({candidate.where}); no good report of {cycle}")
    return result


def _attempt_reasons(status: LegResult) -> list[str]:
    return [r for r in [status.error, *status.reasons] if r]


def assess_worktree(repo: Path, settings: Settings, leg: Leg, *, cycle: str,
                    extra: Sequence[Candidate] = (), replace_edited: bool = False,
                    include_worktree: bool = True) -> LegAssessment:
    """`assess` for a leg from the repository: its working-tree report, its status file, and any
    `extra` candidates (the refresh branch's reports of the leg)."""
    candidates: list[Candidate | None] = [worktree_candidate(repo, settings, leg)] if include_worktree else []
    candidates += list(extra)
    return assess(leg, candidates, read_status(repo, settings, leg), cycle=cycle,
                  input_hash=leg_input_hash(leg, settings), replace_edited=replace_edited)
