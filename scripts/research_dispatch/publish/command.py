"""The publish stage: commits per changed report, a removal and a synthesis commit, a leased push, one PR.

Order of work, and why:
1. Check inputs and auth (exit 2 before any network call); take the repository lock (one writer).
2. Fetch the base and the refresh branch. If the branch carries commits the bot did not make, stop and
   comment (Renovate's "Edited/Blocked") instead of rewriting someone else's work.
3. The branch accumulates (`publish/accumulate`): for every planned leg, the report that stands for it is
   chosen by the one rule of `leg/state` among the working tree's report and the branch's (local and
   remote tips) — the newest good report of this cycle from any run. A refresh is never built from the
   working tree alone, so a partial re-run or a fresh clone never drops another run's work. A report
   edited by hand is refused (exit 2, naming it) unless `--allow-edited`, which commits it with the
   trailer `Edited: yes`. The overlay writes the chosen reports into the working tree, so that:
4. the synthesis matches its commit (`synthesis.stale`): the claims ledger on disk must list exactly the
   reports the commit will hold. When it does not, publish re-synthesizes (possible when the gateway key
   is set or every answer replays from the cache and the ledger); when it cannot, the stale synthesis is
   NOT committed (the branch keeps the base's) and the title and body say "synthesis not updated".
5. Build the commits off to the side (temporary index) on the base: one per leg whose report differs from
   the base, one removing the reports of legs no longer planned, one for the synthesis; push them with a
   lease on the sha inspected in step 2; a lost race means re-fetch and do 3–5 again once.
6. Create or update the single PR. It is a draft, labelled `partial` and titled as partial exactly while
   some planned leg lacks a good report of this cycle or a counted route is unverified. Where GitHub
   cannot make or unmake a draft (422 "Draft pull requests are not supported in this repository.", or
   the Actions token's GraphQL FORBIDDEN) or cannot create the label (no `issues: write`), the label,
   title and body carry the state, the publish succeeds, and says why once.

`--dry-run` takes no lock, fetches nothing and writes nothing: it prints what a publish from the
current knowledge of the branch would commit and say.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from github import GithubException

from research_dispatch.config import environment
from research_dispatch.config.plan import Leg, companions, plan_legs
from research_dispatch.config.schedule import Outlook, outlook, read_crons
from research_dispatch.config.settings import Settings, load_settings
from research_dispatch.config.topics import load_topics
from research_dispatch.core import gitref
from research_dispatch.core.errors import BadInput, DispatchError, ExitCode, PublishError
from research_dispatch.core.fsio import confined, write_atomic
from research_dispatch.core.ghactions import append_step_summary, run_url
from research_dispatch.core.notice import canned_notice, is_canned, read_notice
from research_dispatch.core.redact import KEY_VARIABLES, redacting, register_env
from research_dispatch.core.sanitize import one_line
from research_dispatch.leg.files import writer_lock
from research_dispatch.leg.standing import Candidate, LegAssessment, Where
from research_dispatch.leg.status import LegState
from research_dispatch.publish import prbody
from research_dispatch.publish.accumulate import (
    Accumulation,
    BranchView,
    Tip,
    _unplanned_worktree,
    accumulate,
    apply_overlay,
    branch_view,
    looks_like_report,
    report_stem,
)
from research_dispatch.publish.gitops import CommitInfo, CommitSpec, FileSpec, Git, LeaseRejected
from research_dispatch.publish.messages import (
    removal_message,
    report_message,
    stray_files,
    synthesis_cost,
    synthesis_message,
    synthesis_removal_message,
)
from research_dispatch.publish.pulls import GitHubTarget, PullRequests, Retrier, describe, require_target
from research_dispatch.publish.readiness import (
    base_commit,
    ensure_not_checked_out,
    fetch_heads,
    publisher_git,
    remote_heads,
)
from research_dispatch.synthesis import stale, synthesize

Operation = Literal["created", "updated", "none", "blocked", "dry-run"]
PARTIAL_LABEL = "partial"
BODY_FILE = "pr-body.md"


@dataclass
class PublishResult:
    """What publishing did. `operation` is about the PR: created, updated, none, blocked or dry-run."""

    branch: str
    base: str
    cycle: str
    commits: list[str]
    pushed: bool
    pr_number: int | None
    pr_url: str | None
    operation: Operation
    draft: bool
    title: str
    body: str
    body_path: Path | None
    warnings: list[str] = field(default_factory=list)
    subjects: list[str] = field(default_factory=list)
    message: str = ""
    legs_without_report: list[str] = field(default_factory=list)  # no report of this cycle (failed, missing, ...)
    unverified_legs: list[str] = field(default_factory=list)
    partial: bool = False  # some planned leg lacks a good report of this cycle (or its route is unverified)
    incomplete_legs: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)  # reports of legs no longer planned
    brought: list[str] = field(default_factory=list)  # reports taken from the branch into the working tree
    notes: list[str] = field(default_factory=list)  # what GitHub could not do, said once
    synthesis_note: str = ""  # non-empty when the synthesis was not updated (or was kept as edited)
    cost_usd: float = 0.0  # every call this refresh's legs and synthesis spent, as the PR body says

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode.FAILED if self.operation == "blocked" else ExitCode.OK


@dataclass
class _Synthesis:
    """What the commit does with the synthesis files."""

    commit: bool  # the files on disk describe the commit's reports (or were regenerated to)
    edited: bool = False  # the document was edited by hand and is kept
    note: str = ""  # said in the body when not updated
    missing: bool = False  # none describes the commit's reports: the base's is removed, the PR is partial


@dataclass
class _Plan:
    """What this publish would commit and say, computed against one base commit."""

    base_sha: str
    entries: list[LegAssessment]
    specs: list[CommitSpec]
    changed: set[str]
    synthesis_changed: list[str]
    removed: list[str]
    title: str
    body: str
    draft: bool
    synthesis_note: str = ""
    cost_usd: float = 0.0

    @property
    def empty(self) -> bool:
        return not self.specs


@dataclass(frozen=True)
class _Blobs:
    """The commit's files as blobs, beside the base's blob at each path the commit touches."""

    git: Git
    new: dict[str, str]  # path -> blob of the text this commit writes there
    base: dict[str, str]  # tree path -> the base's blob, for the paths asked that the base has
    removals: list[str]  # the units of legs no longer planned
    absent: dict[str, list[str]]  # stem -> companions its chosen report lacks

    def on_base(self, rel: str) -> bool:
        return self.git.tree_path(rel) in self.base

    def changed(self, rel: str) -> bool:
        return self.base.get(self.git.tree_path(rel)) != self.new[rel]


def _chosen(item: LegAssessment) -> Candidate:
    """The candidate chosen for a leg (only called for legs that have one)."""
    assert item.chosen is not None
    return item.chosen


@dataclass(frozen=True)
class PublishOptions:
    """What one publish is asked to do: the `publish` command's options (`run` sets its own).

    `legs`: the legs whose working-tree reports this publish offers (`--topics`; default all planned);
    every planned leg (`planned`, default: all topics) is assessed over the branch either way, so a
    partial publish never drops another leg's report. `replace_edited` (`run --fresh`) lets newer
    generated reports replace hand edits (saved to build/edited/ first). `resynthesize`: regenerate a
    synthesis that does not describe the commit's reports (never in a dry run). `synthesis_failure`:
    this refresh's synthesis already failed (said in the PR; it is not asked of the gateway again here),
    so the good reports are published without one."""

    cycle: str
    branch: str | None = None  # default: <pr.branch_prefix><cycle>
    base: str | None = None  # default: pr.base
    push: bool = True
    open_pr: bool = True
    dry_run: bool = False
    legs: list[Leg] | None = None
    planned: list[Leg] | None = None
    allow_edited: bool = False
    replace_edited: bool = False
    resynthesize: bool = True
    synthesis_failure: str = ""  # why this refresh's synthesis failed (run's stage, CI's synthesize job)

    def branch_name(self, settings: Settings) -> str:
        return self.branch or f"{settings.pr.branch_prefix}{self.cycle}"

    def base_name(self, settings: Settings) -> str:
        return self.base or settings.pr.base


def _check_ref(name: str, option: str) -> None:
    if not gitref.valid_branch_name(name):
        raise BadInput(f"{name!r} is not {gitref.RULE}", path=option)


class _Publisher:
    """One publish run; holds the shared state so each step stays small."""

    def __init__(self, repo: Path, settings: Settings, options: PublishOptions, *, planned: list[Leg],
                 target: GitHubTarget | None, env: Mapping[str, str], log: Callable[[str], None],
                 sleep: Callable[[float], None]) -> None:
        self.repo, self.settings, self.options, self.cycle = repo, settings, options, options.cycle
        self.branch, self.base = options.branch_name(settings), options.base_name(settings)
        self.planned, self.target, self.env, self.log, self.sleep = planned, target, env, log, sleep
        self.selected = {leg.stem for leg in options.legs} if options.legs is not None else None
        self.allow_edited, self.replace_edited, self.dry_run = (options.allow_edited, options.replace_edited,
                                                                options.dry_run)
        self.resynthesize = options.resynthesize and not options.dry_run
        self.open_pr = options.open_pr
        self.remote = settings.pr.remote
        self.git = publisher_git(repo, settings, env)
        self.run_url = run_url(env)
        self.secrets = [v for k in KEY_VARIABLES if len(v := env.get(k, "")) >= 6]
        self.warnings: list[str] = []
        self.notes: list[str] = []
        self.brought: list[str] = []
        self._client: PullRequests | None = None

    # -- helpers --------------------------------------------------------------------------------
    @property
    def client(self) -> PullRequests | None:
        if self.target is not None and self._client is None:
            self._client = PullRequests(self.target, self.settings.pr,
                                        Retrier(self.settings.pr, sleep=self.sleep, log=self.log))
        return self._client

    def close(self) -> None:
        """Close the GitHub client, if one was made (`publish` does, whatever the outcome)."""
        if self._client is not None:
            self._client.close()

    def warn(self, message: str) -> None:
        if message not in self.warnings:
            self.warnings.append(message)

    def result(self, plan: _Plan | None, operation: Operation, **kwargs: Any) -> PublishResult:
        entries = plan.entries if plan else []
        values: dict[str, Any] = {
            "branch": self.branch, "base": self.base, "cycle": self.cycle, "commits": [], "pushed": False,
            "pr_number": None, "pr_url": None, "operation": operation, "draft": bool(plan and plan.draft),
            "title": plan.title if plan else "", "body": plan.body if plan else "", "body_path": None,
            "warnings": self.warnings, "legs_without_report": [e.stem for e in prbody.without_report(entries)],
            "unverified_legs": [e.stem for e in entries if e.unverified], "partial": bool(plan and plan.draft),
            "incomplete_legs": [e.stem for e in prbody.incomplete(entries)],
            "removed": list(plan.removed) if plan else [], "brought": list(self.brought), "notes": self.notes,
            "synthesis_note": plan.synthesis_note if plan else "", "cost_usd": plan.cost_usd if plan else 0.0}
        values.update(kwargs)
        return PublishResult(**values)

    def save_body(self, plan: _Plan) -> Path:
        path = confined(self.repo, f"{self.settings.build_dir}/{BODY_FILE}")
        write_atomic(path, plan.body)
        return path

    def local_base(self) -> str:
        return base_commit(self.git, self.base, self.remote, option="--base")

    def fetch(self) -> tuple[str, str | None]:
        """Fetch base and branch from the remote; return (base sha, remote branch sha or None)."""
        heads = remote_heads(self.git, self.remote, self.base, self.branch, option="--base")
        tip = fetch_heads(self.git, self.remote, self.base, self.branch, heads)
        base_sha = self.git.rev(f"refs/remotes/{self.remote}/{self.base}")
        if base_sha is None:
            raise PublishError(f"fetching {self.base!r} from {self.remote!r} left no commit to build on")
        return base_sha, tip

    def ensure_not_checked_out(self) -> None:
        ensure_not_checked_out(self.git, self.branch, " or pass --branch")

    def build(self, plan: _Plan, tip: str | None) -> tuple[list[str], bool]:
        """Commit shas on base; reuse the branch's own commits when they already say the same."""
        shas = self.git.build_chain(plan.base_sha, plan.specs)
        if tip is not None and self.git.same_chain(plan.base_sha, tip, shas):
            return [c.sha for c in self.git.commits_between(plan.base_sha, tip)], True
        return shas, False

    def subjects(self, plan: _Plan) -> list[str]:
        return [spec.message.split("\n", 1)[0] for spec in plan.specs]

    # -- what the branch holds ------------------------------------------------------------------
    def view(self, remote_tip: str | None = None) -> BranchView | None:
        """The branch's tips: the local branch and the remote one (freshly fetched when pushing)."""
        view = branch_view(self.repo, self.settings, self.cycle, self.env, branch=self.branch, git=self.git)
        if view is not None and remote_tip is not None and remote_tip not in {t.sha for t in view.tips}:
            view.tips.append(Tip(f"refs/remotes/{self.remote}/{self.branch}", remote_tip))
        return view

    def compose(self, base_sha: str, view: BranchView | None) -> _Plan:
        """Steps 3–5 of the module docstring against one base and one view of the branch."""
        accumulation = accumulate(self.repo, self.settings, self.planned, self.cycle, view,
                                  worktree_stems=self.selected, replace_edited=self.replace_edited)
        accumulation.unplanned_branch = sorted(set(accumulation.unplanned_branch) | set(self.unplanned_on(base_sha)))
        self.refuse_edited(accumulation, base_sha, view)
        if not self.dry_run:
            overlay = apply_overlay(self.repo, self.settings, accumulation, replace_edited=self.replace_edited)
            self.brought += [rel for rel in overlay.brought if rel not in self.brought]
            for line in overlay.lines():
                self.log(f"overlay: {line}")
            for problem in overlay.problems:
                self.warn(problem)
        synthesis = self.synthesis(accumulation, base_sha, view)
        return self.prepare(base_sha, accumulation, synthesis)

    def unplanned_on(self, sha: str) -> list[str]:
        """Reports in `sha`'s research/ of legs no planned leg computes (a topic renamed or removed)."""
        if not self.planned:
            return []
        stems = {leg.stem for leg in self.planned}
        found = []
        view = BranchView(git=self.git, branch=self.branch, tips=[])
        for rel in view.files(sha, self.settings.research_dir):
            stem = report_stem(self.settings, rel)
            if stem is None or stem in stems:
                continue
            text = self.git.read_blob(sha, self.git.tree_path(rel)) or ""
            if looks_like_report(text):
                found.append(rel)
        return found

    def refuse_edited(self, accumulation: Accumulation, base_sha: str, view: BranchView | None) -> None:
        """A report edited by hand is never committed under a model's trailers without `--allow-edited`.
        An edit already on the base or the branch was accepted before and passes. An unfinished merge
        (conflict markers) is refused even with `--allow-edited`, as the synthesis refuses it."""
        for item in accumulation.legs:
            if item.chosen is not None and item.chosen.where is Where.WORKTREE and item.chosen.report is not None:
                item.chosen.report.require_no_conflict()
        if self.allow_edited:
            return
        refused: list[tuple[str, str]] = []
        for item in accumulation.legs:
            chosen = item.chosen
            if chosen is None or not chosen.edited or chosen.where is not Where.WORKTREE:
                continue
            evidence_rel = item.leg.evidence_relpath(self.settings)
            known = [(self.git.read_blob(base_sha, self.git.tree_path(chosen.relpath)),
                      self.git.read_blob(base_sha, self.git.tree_path(evidence_rel)))]
            known += [(c.text, c.evidence_text) for c in item.candidates if c.where is Where.BRANCH]
            if (chosen.text, chosen.evidence_text) not in known or chosen.evidence_link:
                refused.append((chosen.relpath, "; ".join(chosen.edits)))
        if refused:
            listed = ", ".join(f"{rel} ({why})" for rel, why in refused)
            raise BadInput(f"{listed}: edited by hand; not committed under the model's trailers — restore it, move "
                           "it aside (`run --fresh` moves it to build/edited/ and redoes the leg), or pass "
                           "--allow-edited to commit it with the trailer `Edited: yes`", path=refused[0][0])

    def branch_reports(self, accumulation: Accumulation, base_sha: str) -> dict[str, str]:
        """{path: text} of the planned reports the commit will hold: the chosen ones, else the base's."""
        out: dict[str, str] = {}
        for item in accumulation.legs:
            rel = item.leg.report_relpath(self.settings)
            text = item.chosen.text if item.chosen is not None else \
                self.git.read_blob(base_sha, self.git.tree_path(rel))
            if text is not None:
                out[rel] = text
        return out

    def synthesis(self, accumulation: Accumulation, base_sha: str, view: BranchView | None) -> _Synthesis:
        """Commit the synthesis only if it describes exactly the commit's reports (re-synthesize if not).

        With no synthesis on disk (e.g. `research` then `publish --topics X` in a fresh clone) while the
        branch has one, publish re-synthesizes too: the branch's synthesis no longer describes its
        reports, and dropping it silently would lose it."""
        reports = self.branch_reports(accumulation, base_sha)
        ledger = self.settings.ledger_relpath
        on_branch = view is not None and any(self.git.read_blob(t.sha, self.git.tree_path(ledger)) is not None
                                             for t in view.tips)
        failure = self.options.synthesis_failure
        if not (self.repo / ledger).is_file() and not on_branch and not failure:
            return _Synthesis(commit=False)  # no synthesis in this refresh: nothing to commit or to say
        match = stale.matches(self.repo, self.settings, reports)
        if match.matches:
            return _Synthesis(commit=True, edited=stale.document_edited(self.repo, self.settings))
        if self.dry_run and not failure:
            return _Synthesis(commit=False, note=f"The synthesis on disk does not describe this refresh's reports "
                                                 f"({match.reason()}); a real publish regenerates it.")
        why = failure or "re-synthesizing is off for this call"
        if self.resynthesize and not failure:
            self.log(f"the synthesis on disk does not describe the reports this commit holds ({match.reason()}); "
                     "re-synthesizing")
            try:
                if stale.document_edited(self.repo, self.settings):
                    saved = stale.save_edit(self.repo, self.settings)
                    self.warn(f"{self.settings.document_relpath} was edited by hand and its reports changed; it is "
                              f"regenerated, and the edit is saved in {saved}")

                synthesize(self.repo, self.settings, env=self.env, cycle=self.cycle, legs=self.planned)
                match = stale.matches(self.repo, self.settings, reports)
                if match.matches:
                    return _Synthesis(commit=True)
                why = f"the regenerated synthesis still differs: {match.reason()}"
            except Exception as exc:  # any failure: the stale synthesis must not be committed
                why = f"{type(exc).__name__}: {exc}" if not isinstance(exc, DispatchError) else str(exc)
        if stale.compare(stale.ledger_text_reports(self.git.read_blob(base_sha, self.git.tree_path(ledger))),
                         reports).matches:
            note = (f"The synthesis was not regenerated ({one_line(why, 300)}), but the base's synthesis "
                    "describes exactly this commit's reports, so it stands.")
            return _Synthesis(commit=False, note=note)
        note = (f"The synthesis is missing: none describes the reports this commit holds, and it could not be "
                f"computed ({one_line(why, 300)}). The good reports are published without it; a synthesis of "
                "other reports is removed from this branch rather than shown as current. Re-run the synthesis "
                "(`research-dispatch synthesize`, or the workflow's failed jobs) and publish again.")
        self.warn(note)
        return _Synthesis(commit=False, note=note, missing=True)

    def prepare(self, base_sha: str, accumulation: Accumulation, synthesis: _Synthesis) -> _Plan:
        """The commits against base_sha, their messages, the title and the body: the steps below, in order."""
        entries = accumulation.legs
        chosen = [e for e in entries if e.chosen is not None]
        synth_files = self.synthesis_files(synthesis)
        blobs = self.blobs(base_sha, chosen, synth_files, accumulation.unplanned)
        specs, changed_stems = self.report_commits(chosen, blobs)
        specs += self.removal_commits(blobs)
        synthesis_specs, synthesis_changed = self.synthesis_commits(base_sha, synth_files, blobs, synthesis,
                                                                    reports_on_branch=len(chosen))
        specs += synthesis_specs
        updated = bool(synthesis_changed) and not synthesis.missing
        synthesis_usd = synthesis_cost(self.repo, self.settings) if updated else 0.0
        title = self.title(entries, changed_stems, synthesis, updated=updated)
        body = self.body(base_sha, entries, changed_stems, synthesis_changed, synthesis,
                         removed=accumulation.unplanned, synthesis_usd=synthesis_usd)
        cost = round(sum(e.report_cost_usd for e in entries if e.stem in changed_stems)
                     + sum(e.failed_attempt_cost_usd for e in entries) + synthesis_usd, 6)
        return _Plan(base_sha=base_sha, entries=entries, specs=specs, changed=changed_stems,
                     synthesis_changed=synthesis_changed, removed=accumulation.unplanned, title=title, body=body,
                     draft=bool(prbody.incomplete(entries)) or synthesis.missing, synthesis_note=synthesis.note,
                     cost_usd=cost)

    def synthesis_files(self, synthesis: _Synthesis) -> list[tuple[str, str]]:
        """The synthesis files this commit carries, as (path, text): none unless the synthesis describes the
        commit's reports; a symbolic link is never followed into a commit."""
        files: list[tuple[str, str]] = []
        if not synthesis.commit:
            return files
        for rel in self.settings.synthesis_relpaths():
            path = self.repo / rel
            if path.is_symlink():
                self.warn(f"{rel} is a symbolic link; not committed")
            elif path.is_file():
                confined(self.repo, rel)
                files.append((rel, path.read_bytes().decode("utf-8", errors="replace")))
        return files

    def blobs(self, base_sha: str, chosen: list[LegAssessment], synth_files: list[tuple[str, str]],
              unplanned: list[str]) -> _Blobs:
        """Every file the commit writes as a blob (written to the object store unless a dry run), and the
        base's blob at every path the commit writes, removes or must clear."""
        settings = self.settings
        files = [(write.relpath, write.text) for item in chosen
                 for write in _chosen(item).unit(item.leg, settings)] + synth_files
        new = dict(zip([rel for rel, _ in files],
                       self.git.hash_texts([text for _, text in files], write=not self.dry_run), strict=True))
        removals = [rel for stem_rel in unplanned for rel in (stem_rel, *companions(stem_rel))]
        # a companion the chosen report does not have (an older report: no evidence file) must not stay
        # beside it from an earlier commit, where it would pass for this report's
        absent = {item.stem: [rel for rel in companions(item.leg.report_relpath(settings)) if rel not in new]
                  for item in chosen}
        asked = [*new, *removals, *(rel for rels in absent.values() for rel in rels)]
        base = self.git.blob_shas(base_sha, [self.git.tree_path(rel) for rel in asked])
        return _Blobs(self.git, new=new, base=base, removals=removals, absent=absent)

    def report_commits(self, chosen: list[LegAssessment], blobs: _Blobs) -> tuple[list[CommitSpec], set[str]]:
        """One commit per leg whose unit differs from the base's (its report, its companions, a companion
        it no longer has); the stems of those legs."""
        git, specs, changed_stems = self.git, [], set()
        for item in chosen:
            rels = [write.relpath for write in _chosen(item).unit(item.leg, self.settings)]  # report and companions
            stale_rels = [rel for rel in blobs.absent[item.stem] if blobs.on_base(rel)]
            if not stale_rels and not any(blobs.changed(rel) for rel in rels):
                continue
            changed_stems.add(item.stem)
            specs.append(CommitSpec(files=(*(FileSpec(git.tree_path(rel), blob=blobs.new[rel]) for rel in rels),
                                           *(FileSpec(git.tree_path(rel), delete=True) for rel in stale_rels)),
                                    message=report_message(item, self.cycle, self.run_url)))
        return specs, changed_stems

    def removal_commits(self, blobs: _Blobs) -> list[CommitSpec]:
        """One commit removing the units of legs no longer planned, where the base has them."""
        to_remove = [rel for rel in blobs.removals if blobs.on_base(rel)]
        if not to_remove:
            return []
        return [CommitSpec(files=tuple(FileSpec(self.git.tree_path(rel), delete=True) for rel in to_remove),
                           message=removal_message(to_remove, self.cycle, self.run_url))]

    def synthesis_commits(self, base_sha: str, synth_files: list[tuple[str, str]], blobs: _Blobs,
                          synthesis: _Synthesis, *, reports_on_branch: int) -> tuple[list[CommitSpec], list[str]]:
        """The synthesis commit (its files that differ from the base's), or, when no synthesis describes the
        commit's reports, one removing the base's generated files; and the paths it touches."""
        git = self.git
        changed = [rel for rel, _ in synth_files if blobs.changed(rel)]
        specs = []
        if changed:
            specs.append(CommitSpec(files=tuple(FileSpec(git.tree_path(rel), blob=blobs.new[rel]) for rel in changed),
                                    message=synthesis_message(changed, self.cycle, self.run_url, reports_on_branch,
                                                              edited=synthesis.edited)))
        if not synthesis.missing:
            return specs, changed
        # the methodology page is the team's prose: only the synthesis' own files go
        generated = [self.settings.document_relpath, self.settings.ledger_relpath,
                     self.settings.synthesis_calls_relpath]
        on_base = git.blob_shas(base_sha, [git.tree_path(rel) for rel in generated])
        stale_files = [rel for rel in generated if git.tree_path(rel) in on_base]
        if not stale_files:
            return specs, changed
        specs.append(CommitSpec(files=tuple(FileSpec(git.tree_path(rel), delete=True) for rel in stale_files),
                                message=synthesis_removal_message(stale_files, self.cycle, self.run_url)))
        return specs, stale_files

    def title(self, entries: list[LegAssessment], changed_stems: set[str], synthesis: _Synthesis, *,
              updated: bool) -> str:
        """The PR title: what the commit refreshes and, while partial, what is missing."""
        gaps = prbody.incomplete(entries)
        counts = {state: sum(1 for e in entries if e.state is state) for state in LegState}
        stale_synthesis = bool(synthesis.note) and not synthesis.commit and not synthesis.missing
        return prbody.render_title(self.cycle, reports=len(changed_stems), synthesis=updated,
                                   failed=counts[LegState.FAILED], missing=counts[LegState.MISSING],
                                   stale=counts[LegState.STALE], invalid=counts[LegState.INVALID],
                                   unverified=counts[LegState.UNVERIFIED],
                                   complete=len(entries) - len(gaps), planned=len(entries),
                                   synthesis_stale=stale_synthesis, synthesis_missing=synthesis.missing)

    def body(self, base_sha: str, entries: list[LegAssessment], changed_stems: set[str], synthesis_changed: list[str],
             synthesis: _Synthesis, *, removed: list[str], synthesis_usd: float) -> str:
        """The PR body: the legs' table, the claim diff and agreement (when the synthesis is committed), the
        synthesis' state, the notes; sanitised and capped by `prbody`."""
        settings, ledger = self.settings, self.settings.ledger_relpath
        if synthesis.commit:
            diff, diff_short, note = prbody.claim_diff(self.git.read_blob(base_sha, self.git.tree_path(ledger)),
                                                       self.repo / ledger, ledger)
        else:
            diff, diff_short, note = None, None, "Synthesis not updated in this refresh (see above)."
        synthesis_note = synthesis.note
        if synthesis.edited and synthesis_changed:
            synthesis_note = (f"`{settings.document_relpath}` was edited by hand and nothing it depends on changed: "
                              "it is committed as edited (trailer `Edited: yes`).")
        canned = [e.stem for e in entries if e.chosen is not None and is_canned(e.chosen.text)]  # a run on the fakes
        facts = prbody.BodyFacts(cycle=self.cycle, branch=self.branch, base=self.base, base_sha=base_sha,
                                 entries=entries, synthesis_changed=synthesis_changed,
                                 framework_doc=settings.document_relpath,
                                 claim_diff=diff, claim_diff_short=diff_short, claim_note=note,
                                 agreement=prbody.agreement_matrix(self.repo / ledger) if synthesis.commit else None,
                                 run_url=self.run_url, synthesis_cost_usd=synthesis_usd,
                                 changed=changed_stems, removed=removed, synthesis_note=synthesis_note,
                                 notes=list(self.notes), notice=read_notice(self.repo) or canned_notice(canned),
                                 synthesis_missing=synthesis.missing, schedule=self.schedule(base_sha))
        return prbody.render_body(facts, secrets=self.secrets)

    def schedule(self, base_sha: str) -> Outlook:
        """The next cycle and the pause date, from the repository's own schedule file and the base's last
        commit (the PR body's 📅 line)."""
        now = dt.datetime.now(dt.timezone.utc)
        return outlook(read_crons(self.repo), self.git.commit_date(base_sha) or now.date(), now)

    # -- flows ----------------------------------------------------------------------------------
    def blocked(self, plan: _Plan | None, where: str, tip: str, foreign: list[CommitInfo]) -> PublishResult:
        names = ", ".join(f"{c.sha[:8]} by {prbody.inline(c.author_name, 60)}" for c in foreign[:5])
        more = f" and {len(foreign) - 5} more" if len(foreign) > 5 else ""
        message = (f"blocked: the {where} branch {self.branch} has {len(foreign)} commit(s) the bot did not make "
                   f"({names}{more}); not overwriting them")
        number = url = None
        if where == "remote" and self.client is not None:
            open_prs = self.client.find_open(self.branch, self.base)
            if open_prs:
                pr = open_prs[0]
                number, url = pr.number, pr.html_url
                key = f"{prbody.MARKER_NAME} blocked cycle={self.cycle} head={tip}"
                comment = prbody.blocked_comment(self.cycle, self.branch, tip, foreign)
                posted = self.client.comment_once(pr, key, comment)
                message += f"; {'commented on' if posted else 'already commented on'} PR #{pr.number}"
        body_path = self.save_body(plan) if plan is not None else None
        return self.result(plan, "blocked", pr_number=number, pr_url=url, body_path=body_path, message=message)

    def dry(self) -> PublishResult:
        plan = self.compose(self.local_base(), self.view())
        message = "dry run: nothing was committed, pushed or sent"
        if plan.empty:
            message += f"; nothing differs from {self.base}, so a real run would publish nothing"
        return self.result(plan, "dry-run", subjects=self.subjects(plan), message=message)

    def local_only(self) -> PublishResult:
        base_sha = self.local_base()
        local_tip = self.git.rev(f"refs/heads/{self.branch}")
        if local_tip is not None:
            foreign = self.git.foreign_commits(base_sha, local_tip)
            if foreign:
                return self.blocked(None, "local", local_tip, foreign)
        plan = self.compose(base_sha, self.view())
        if plan.empty:
            return self.result(plan, "none", message="nothing to publish: no report or synthesis file differs "
                                                     f"from {self.base}")
        self.ensure_not_checked_out()
        shas, reused = self.build(plan, local_tip)
        if shas[-1] != local_tip:
            self.git.update_ref(f"refs/heads/{self.branch}", shas[-1], local_tip,
                                f"research-dispatch: publish {self.cycle}")
        note = "already up to date" if reused else f"{len(shas)} commit(s)"
        return self.result(plan, "none", commits=shas, subjects=self.subjects(plan), body_path=self.save_body(plan),
                           message=f"committed to local branch {self.branch} ({note}); not pushed")

    def pushed(self) -> PublishResult:
        url = self.git.remote_url(self.remote)
        if url is None:
            raise BadInput(f"no git remote {self.remote!r} to push to; add one or pass --no-push",
                           path="pr.remote")
        github = environment.GITHUB
        if self.target is not None:
            token = self.target.token
        elif self.env.get(github.key_variable):  # `--no-pr`: the token is optional, but checked alike
            token = environment.check_key(self.env, github.key_variable, github.purpose)
        else:
            token = ""
        if token:
            self.git.use_token_for(url, token)
        for attempt in (1, 2):
            base_sha, tip = self.fetch()
            local_tip = self.git.rev(f"refs/heads/{self.branch}")
            for where, head in (("remote", tip), ("local", local_tip)):
                foreign = self.git.foreign_commits(base_sha, head) if head else []
                if foreign and head:
                    return self.blocked(None, where, head, foreign)
            plan = self.compose(base_sha, self.view(tip))
            if plan.empty:
                return self.result(plan, "none", message="nothing to publish: no report or synthesis file "
                                                         f"differs from {self.remote}/{self.base}")
            self.ensure_not_checked_out()
            if attempt == 1:
                skip = self.closed_cycle()
                if skip is not None:
                    return self.result(plan, "none", message=skip, body_path=self.save_body(plan))
            shas, reused = self.build(plan, tip)
            if not reused:
                try:
                    self.git.push_with_lease(self.remote, shas[-1], self.branch, tip)
                except LeaseRejected:
                    if attempt == 2:
                        raise PublishError(f"push refused twice: {self.branch} on {self.remote} keeps moving while "
                                           "this run publishes; nothing was overwritten; re-run later") from None
                    self.log(f"{self.branch} moved on {self.remote} while publishing; fetching and checking again")
                    continue
            if shas[-1] != local_tip:
                self.git.update_ref(f"refs/heads/{self.branch}", shas[-1], local_tip,
                                    f"research-dispatch: publish {self.cycle}")
            newer = None if reused else self.newer_tip(shas[-1])
            if newer is not None:
                return self.result(plan, "none", commits=shas, pushed=True, subjects=self.subjects(plan),
                                   body_path=self.save_body(plan),
                                   message=f"{self.branch} pushed; another publish of this cycle has pushed on top of "
                                           f"it since ({newer[:12]}) and updates the PR for that tip, so this one "
                                           "leaves the PR to it")
            return self.open_or_update(plan, shas, pushed=not reused)
        raise AssertionError("unreachable")  # pragma: no cover

    def newer_tip(self, pushed: str) -> str | None:
        """The remote branch's tip when another publish pushed on top of ours since (the loser of a push
        race pushing again), else None. Its PR update describes the newer tip; ours, landing after it,
        would title and label the PR for fewer reports than the branch holds. Asked of git, not of
        GitHub: a PR's head follows a push only after a delay. When the remote cannot say, None (the PR
        is updated as before)."""
        try:
            tip = self.git.ls_remote_heads(self.remote, [self.branch]).get(self.branch)
        except PublishError:
            return None
        return tip if tip is not None and tip != pushed else None

    def closed_cycle(self) -> str | None:
        """Closing the PR skips the cycle (the body says so): a closed, unmerged PR and no open one."""
        client = self.client
        closed = client.closed_cycle(self.branch, self.base) if client is not None else None
        if closed is None:
            return None
        return (f"nothing published: PR #{closed.number} for {self.branch} was closed without merging, which "
                "skips this cycle; reopen it to let the bot update it")

    def open_or_update(self, plan: _Plan, shas: list[str], *, pushed: bool) -> PublishResult:
        state = "pushed" if pushed else "already up to date on " + self.remote
        common = {"commits": shas, "pushed": pushed, "subjects": self.subjects(plan), "body_path": self.save_body(plan)}
        client = self.client
        if client is None:
            reason = "--no-pr" if not self.open_pr else "no PR requested"
            return self.result(plan, "none", message=f"{self.branch} {state}; pull request skipped ({reason})",
                               **common)
        try:
            pr, operation, warnings = client.upsert(branch=self.branch, base=self.base, title=plan.title,
                                                    body=plan.body, draft=plan.draft)
            for warning in warnings:
                self.warn(warning)
            self.notes += [n for n in client.set_draft(pr, plan.draft) if n not in self.notes]
            labels = list(self.settings.pr.labels) + ([PARTIAL_LABEL] if plan.draft else [])
            self.notes += [n for n in client.sync_labels(pr, labels, managed=[PARTIAL_LABEL]) if n not in self.notes]
            self.notes += [n for n in client.notes if n not in self.notes]
        except GithubException as exc:
            raise PublishError(f"GitHub: {describe(exc)} (the branch was {state}; re-run to retry the PR)") from None
        is_draft = bool(pr.draft)  # what GitHub did, which may differ from what the state asks (notes say why)
        draft = " (draft)" if is_draft else ""
        partial = ", partial" if plan.draft else ""
        done: Operation = "created" if operation == "created" else "updated"
        return self.result(plan, done, pr_number=pr.number, pr_url=pr.html_url, draft=is_draft,
                           message=f"{self.branch} {state}; PR #{pr.number} {operation}{draft}{partial}", **common)


def publish(repo: Path, settings: Settings, options: PublishOptions, *, env: Mapping[str, str] | None = None,
            log: Callable[[str], None] | None = None, sleep: Callable[[float], None] = time.sleep) -> PublishResult:
    """Publish the refresh: commits, leased push, PR upsert. See the module docstring for the order.

    Raises `BadInput` (exit 2: bad option, missing token or repository, no remote, a hand-edited report
    without `allow_edited`) and `PublishError` (exit 1: git or GitHub failed for good). A branch edited by
    someone else is not an exception: the result's `operation` is "blocked" and its `exit_code` 1.
    """
    env = dict(os.environ if env is None else env)
    register_env(env)  # keys that live only in `env` are redacted everywhere too
    repo = Path(repo)
    base_name, branch_name = options.base_name(settings), options.branch_name(settings)
    _check_ref(base_name, "--base")
    _check_ref(branch_name, "--branch")
    if branch_name == base_name:
        raise BadInput(f"the refresh branch cannot be the base branch ({base_name!r})", path="--branch")
    target = require_target(env) if (options.open_pr and options.push and not options.dry_run) else None
    planned = options.planned if options.planned is not None else plan_legs(load_topics(repo, settings), settings)
    say = log or (lambda _m: None)
    publisher = _Publisher(repo, settings, options, planned=planned, target=target, env=env, log=say, sleep=sleep)
    with contextlib.closing(publisher):
        publisher.git.check_repository()
        computed = {rel for leg in planned for rel in leg.unit_relpaths(settings)}
        for rel in stray_files(repo, settings, computed):
            if not rel.endswith(".md") or rel not in _unplanned_reports(repo, settings, planned):
                publisher.warn(f"{rel} is not a computed report or synthesis path; not committed")
        if options.dry_run:
            return publisher.dry()
        with writer_lock(repo, settings.build_dir, "publish", warn=lambda message: say(f"warning: {message}")):
            return publisher.local_only() if not options.push else publisher.pushed()


def _unplanned_reports(repo: Path, settings: Settings, planned: list[Leg]) -> set[str]:
    return set(_unplanned_worktree(repo, settings, {leg.stem for leg in planned}))


def summary_lines(result: PublishResult) -> list[str]:
    lines = [f"publish: {result.branch} → {result.base} (cycle {result.cycle})"]
    if result.commits:
        lines.append(f"commits: {len(result.commits)}")
        lines += [f"  {sha[:10]} {subject}" for sha, subject in zip(result.commits, result.subjects, strict=False)]
    lines.append(f"pushed: {'yes' if result.pushed else 'no'}")
    if result.pr_number is not None:
        draft = ", draft" if result.draft else ""
        partial = ", partial" if result.partial else ""
        lines.append(f"pull request: #{result.pr_number} {result.operation}{draft}{partial} "
                     f"{result.pr_url or ''}".rstrip())
    if result.brought:
        lines.append("taken from the refresh branch: " + ", ".join(result.brought))
    if result.legs_without_report:
        lines.append("without a report of this cycle: " + ", ".join(result.legs_without_report))
    if result.unverified_legs:
        lines.append("unverified routes: " + ", ".join(result.unverified_legs))
    if result.incomplete_legs:
        lines.append(f"partial: {len(result.incomplete_legs)} planned leg(s) without a good report of this cycle: "
                     + ", ".join(result.incomplete_legs))
    if result.removed:
        lines.append("removed (legs no longer planned): " + ", ".join(result.removed))
    lines.append(f"cost: ${result.cost_usd:.4f} (reports refreshed, failed attempts and synthesis)")
    lines += [f"note: {n}" for n in result.notes]
    if result.body_path is not None:
        lines.append(f"body: {result.body_path}")
    lines += [f"warning: {w}" for w in result.warnings]
    if result.message:
        lines.append(result.message)
    return lines


def publish_command(repo: Path, *, branch: str | None, base: str | None, push: bool, open_pr: bool, dry_run: bool,
                    cycle: str, env: Mapping[str, str], echo: Callable[[str], None],
                    github_summary: bool = False, legs: list[Leg] | None = None,
                    allow_edited: bool = False, synthesis_failure: str = "") -> ExitCode:
    """The CLI's `publish`: run, print a short summary (or, with --dry-run, the title and body)."""
    settings = load_settings(repo)
    say = redacting(echo, env)

    options = PublishOptions(cycle=cycle, branch=branch, base=base, push=push, open_pr=open_pr, dry_run=dry_run,
                             legs=legs, allow_edited=allow_edited, synthesis_failure=synthesis_failure)
    result = publish(repo, settings, options, env=env, log=say)
    if dry_run:
        say(result.title)
        say("")
        say(result.body)
        for warning in result.warnings:
            say(f"warning: {warning}")
        say(result.message)
        if github_summary:
            append_step_summary(env, f"## Pull request preview (dry run)\n\n**{result.title}**\n\n{result.body}")
        return ExitCode.OK
    for line in summary_lines(result):
        say(line)
    if github_summary:
        append_step_summary(env, "## Pull request\n\n" + "\n".join(f"- {line}" for line in summary_lines(result)))
    return result.exit_code
