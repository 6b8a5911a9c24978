"""The cycle branch accumulates: what it holds for every planned leg, and the overlay into the working tree.

The refresh branch of a cycle holds, for every planned leg, the newest good report of this cycle that
any run produced — local or CI, whole or `--topics`, from a fresh clone or not. So a refresh is never
built from the working tree alone: for each planned leg the candidates are the working tree's report
and the report on every tip of the branch this repository knows (`refs/heads/<branch>` and
`refs/remotes/<remote>/<branch>`, whichever exist — a fresh clone knows the remote one, a laptop that
published without pushing knows the local one), and the one rule of `leg/state` picks the report that
stands for the leg. A report is replaced only by a newer good one.

The *overlay* makes the working tree match: it writes the branch's chosen reports (report, call log and
evidence file as one unit) over older working-tree ones, moves the reports of legs no longer planned out of
`research/` into `build/unplanned/` (the refresh removes them from the branch), and never overwrites a
report edited by hand. `run` overlays before deciding which legs to redo and before synthesizing,
`synthesize` before synthesizing (so CI's synthesize job, which checks out every branch, describes the
reports the branch will hold), and `publish` before committing. A working-tree report the overlay
replaces that the branch does not hold is kept in `build/replaced/`. Everything here runs under the
repository lock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from research_dispatch.config.plan import Leg, companions
from research_dispatch.config.settings import Settings
from research_dispatch.core.errors import DispatchError
from research_dispatch.core.fsio import confined, write_atomic
from research_dispatch.leg.files import write_unit
from research_dispatch.leg.report import MAX_REPORT_BYTES, SCHEMA
from research_dispatch.leg.standing import (
    Candidate,
    LegAssessment,
    Where,
    assess_worktree,
    read_candidate,
    worktree_candidate,
)
from research_dispatch.publish.gitops import Git, Identity

UNPLANNED_DIR = "unplanned"
EDITED_DIR = "edited"
REPLACED_DIR = "replaced"


@dataclass(frozen=True)
class Tip:
    ref: str
    sha: str


@dataclass
class BranchView:
    """The refresh branch as this repository knows it, and a reader of its trees."""

    git: Git
    branch: str
    tips: list[Tip]

    def blob_text(self, sha: str, rel: str) -> str | None:
        text = self.git.read_blob(sha, self.git.tree_path(rel))
        return text if text is not None and len(text) <= MAX_REPORT_BYTES * 4 else None

    def files(self, sha: str, directory: str) -> dict[str, str]:
        """{worktree-relative path: blob sha} of the files under `directory` in commit `sha`."""
        prefix = self.git.prefix
        found = self.git.blob_shas(sha, [self.git.tree_path(directory)])
        return {path[len(prefix):]: blob for path, blob in found.items() if path.startswith(prefix)}

    def candidates(self, settings: Settings, leg: Leg) -> list[Candidate]:
        out: list[Candidate] = []
        seen: set[str] = set()
        for tip in self.tips:
            text = self.blob_text(tip.sha, leg.report_relpath(settings))
            if text is None or text in seen:
                continue
            seen.add(text)
            out.append(read_candidate(leg, settings, where=Where.BRANCH, text=text,
                                      calls_text=self.blob_text(tip.sha, leg.calls_relpath(settings)),
                                      evidence_text=self.blob_text(tip.sha, leg.evidence_relpath(settings)),
                                      origin=tip.sha))
        return out


def branch_view(repo: Path, settings: Settings, cycle: str, env: Mapping[str, str], *,
                branch: str | None = None, git: Git | None = None) -> BranchView | None:
    """The refresh branch's tips this repository knows (no network), or None outside a git repository."""
    name = branch or f"{settings.pr.branch_prefix}{cycle}"
    if git is None:
        git = Git(repo, env, Identity(name=settings.pr.bot_name, email=settings.pr.bot_email))
        try:
            if git.run("rev-parse", "--is-inside-work-tree", check=False).stdout.strip() != "true":
                return None
        except DispatchError:
            return None
    tips: list[Tip] = []
    for ref in (f"refs/heads/{name}", f"refs/remotes/{settings.pr.remote}/{name}"):
        sha = git.rev(ref)
        if sha is not None and sha not in {t.sha for t in tips}:
            tips.append(Tip(ref, sha))
    return BranchView(git=git, branch=name, tips=tips)


@dataclass
class Accumulation:
    """Every planned leg assessed over the working tree and the branch, and the unplanned reports."""

    cycle: str
    legs: list[LegAssessment]
    unplanned_worktree: list[str] = field(default_factory=list)  # report paths in research/ of no planned leg
    unplanned_branch: list[str] = field(default_factory=list)  # the same on a tip of the branch

    def by_stem(self) -> dict[str, LegAssessment]:
        return {a.stem: a for a in self.legs}

    @property
    def unplanned(self) -> list[str]:
        return sorted(set(self.unplanned_worktree) | set(self.unplanned_branch))


def accumulate(repo: Path, settings: Settings, legs: Iterable[Leg], cycle: str, view: BranchView | None, *,
               worktree_stems: set[str] | None = None, replace_edited: bool = False) -> Accumulation:
    """Assess every planned leg with the branch's reports as extra candidates (`leg/state.assess`).

    `worktree_stems`: the legs whose working-tree report is a candidate (default: all). `publish
    --topics X` passes X's legs: the other legs' working-tree files were not produced by this refresh.
    """
    planned = sorted(legs, key=lambda leg: leg.stem)
    assessed = []
    for leg in planned:
        extra = view.candidates(settings, leg) if view is not None else []
        include = worktree_stems is None or leg.stem in worktree_stems
        assessed.append(assess_worktree(repo, settings, leg, cycle=cycle, extra=extra,
                                        replace_edited=replace_edited, include_worktree=include))
    result = Accumulation(cycle=cycle, legs=assessed)
    if planned:  # without a plan (no topic files) nothing is "unplanned"
        stems = {leg.stem for leg in planned}
        result.unplanned_worktree = _unplanned_worktree(repo, settings, stems)
        if view is not None:
            found: set[str] = set()
            for tip in view.tips:
                for rel in view.files(tip.sha, settings.research_dir):
                    stem = report_stem(settings, rel)
                    if stem is not None and stem not in stems:
                        found.add(rel)
            result.unplanned_branch = sorted(found)
    return result


def report_stem(settings: Settings, rel: str) -> str | None:
    prefix = settings.research_dir.rstrip("/") + "/"
    name = rel[len(prefix):] if rel.startswith(prefix) else None
    if not name or "/" in name or not name.endswith(".md") or name.startswith("."):
        return None
    return name[: -len(".md")]


def _unplanned_worktree(repo: Path, settings: Settings, stems: set[str]) -> list[str]:
    directory = repo / settings.research_dir
    if not directory.is_dir():
        return []
    found = []
    for path in sorted(directory.glob("*.md")):
        stem = path.name[: -len(".md")]
        if stem in stems or path.name.startswith(".") or path.is_symlink() or not path.is_file():
            continue
        try:
            with path.open("rb") as handle:
                head = handle.read(4096).decode("utf-8", errors="replace")
        except OSError:
            continue
        if looks_like_report(head):
            found.append(f"{settings.research_dir}/{path.name}")
    return found


def looks_like_report(text: str) -> bool:
    """A generated report (our schema in the front matter), not a person's note that lives in research/."""
    return text.startswith("---\n") and f"schema: {SCHEMA}" in text[:4096].split("\n---\n", 1)[0]


@dataclass
class OverlayResult:
    brought: list[str] = field(default_factory=list)  # reports taken from the branch into the working tree
    unplanned_moved: list[str] = field(default_factory=list)  # moved to build/unplanned/
    edited_kept: list[str] = field(default_factory=list)  # edited working-tree reports left alone
    edited_set_aside: list[tuple[str, str]] = field(default_factory=list)  # (edit, where saved): replace_edited
    problems: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        out = [f"took {rel} from the refresh branch (its newest good report of this cycle)" for rel in self.brought]
        out += [f"moved {rel} to the build folder: its leg is no longer planned (the refresh removes it)"
                for rel in self.unplanned_moved]
        out += [f"warning: {rel} was edited by hand; kept as it is (not replaced by the branch's report)"
                for rel in self.edited_kept]
        out += [f"warning: {rel} (edited by hand) is replaced; the edit is saved in {where}"
                for rel, where in self.edited_set_aside]
        out += [f"warning: {p}" for p in self.problems]
        return out


def apply_overlay(repo: Path, settings: Settings, accumulation: Accumulation, *, move_unplanned: bool = True,
                  replace_edited: bool = False) -> OverlayResult:
    """Make the working tree hold, for every planned leg, the report that stands for it (see the module
    docstring). Call under the repository lock."""
    result = OverlayResult()
    for item in accumulation.legs:
        chosen = item.chosen
        worktree = next((c for c in item.candidates if c.where is Where.WORKTREE), None)
        if replace_edited:
            for lost in (c for c in item.candidates if c.edited and c is not chosen and c.where is Where.BRANCH):
                where = set_aside(repo, settings, item.leg, lost, EDITED_DIR)
                result.edited_set_aside.append((f"{lost.relpath} ({lost.where})", where))
        if chosen is None or chosen.where is not Where.BRANCH:
            continue
        if worktree is not None and worktree.same_files(chosen):
            continue
        if worktree is not None and worktree.edited and not replace_edited:
            result.edited_kept.append(worktree.relpath)  # never overwrite a hand edit
            continue
        if worktree is not None and worktree.text and not any(c.text == worktree.text for c in item.candidates
                                                              if c.where is Where.BRANCH):
            # superseded by a newer good report, but not on the branch: kept in build/replaced/, not lost
            set_aside(repo, settings, item.leg, worktree, REPLACED_DIR)
        unit = chosen.unit(item.leg, settings)
        try:
            write_unit(repo, settings.build_dir, item.stem, unit)
        except DispatchError as exc:
            result.problems.append(str(exc))
            continue
        for stale in sorted(set(item.leg.unit_relpaths(settings)) - {write.relpath for write in unit}):
            # the replaced report's companion (an evidence file beside a branch report that has none) must
            # not pass for the new report's; the path is computed, and a link is removed, never followed
            try:
                (repo / stale).unlink(missing_ok=True)
            except OSError as exc:
                result.problems.append(f"could not remove {stale}: {exc.strerror or exc}")
        result.brought.append(chosen.relpath)
    if move_unplanned:
        for rel in accumulation.unplanned_worktree:
            try:
                move_aside(repo, settings, rel, UNPLANNED_DIR)
            except (OSError, DispatchError) as exc:
                result.problems.append(f"could not move {rel} aside: {exc}")
                continue
            result.unplanned_moved.append(rel)
    return result


def move_aside(repo: Path, settings: Settings, rel: str, folder: str) -> str:
    """Move a report, its call log and its evidence file from the working tree into `build/<folder>/`
    (nothing is lost)."""
    target_dir = f"{settings.build_dir}/{folder}"
    moved = ""
    for source_rel in (rel, *companions(rel)):
        source = confined(repo, source_rel)
        if not source.is_file() or source.is_symlink():
            continue
        target = confined(repo, f"{target_dir}/{Path(source_rel).name}")
        write_atomic(target, source.read_bytes())
        source.unlink()
        moved = moved or target.relative_to(repo.resolve()).as_posix()
    return moved


def set_aside(repo: Path, settings: Settings, leg: Leg, candidate: Candidate, folder: str) -> str:
    """Save a report (with its call log and evidence file) that is about to be replaced into
    `build/<folder>/`; returns where the report went."""
    target = ""
    for write in candidate.unit(leg, settings):
        saved = f"{settings.build_dir}/{folder}/{Path(write.relpath).name}"
        write_atomic(confined(repo, saved), write.text)
        target = saved  # the report is the unit's last file
    return target


def set_aside_edited(repo: Path, settings: Settings, leg: Leg, say: Callable[[str], None]) -> str | None:
    """`research LEG` redoes a leg on request: a hand-edited report of it is moved to `build/edited/`
    first (never overwritten silently). Returns where it went, or None."""
    candidate = worktree_candidate(repo, settings, leg)
    if candidate is None or not candidate.edited:
        return None
    where = move_aside(repo, settings, candidate.relpath, EDITED_DIR)
    say(f"warning: {candidate.relpath} was edited by hand; moved to {where} before researching the leg again")
    return where


def move_edited_aside(repo: Path, settings: Settings, assessments: Iterable[LegAssessment],
                      say: Callable[[str], None]) -> list[str]:
    """`run --fresh`: move every edited working-tree report to `build/edited/` before its leg is redone."""
    moved = []
    for item in assessments:
        worktree = next((c for c in item.candidates if c.where is Where.WORKTREE), None)
        if worktree is not None and worktree.edited:
            where = move_aside(repo, settings, worktree.relpath, EDITED_DIR)
            say(f"warning: {worktree.relpath} was edited by hand; --fresh moved it to {where} before redoing "
                "the leg")
            moved.append(worktree.relpath)
    return moved
