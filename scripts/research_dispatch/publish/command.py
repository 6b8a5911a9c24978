"""The publish stage: commits per changed report plus one synthesis commit, a leased push, one PR.

Order of work, and why:
1. Check inputs and auth (exit 2 before any network call).
2. Read every planned leg's report, call log and status; decide what changed against the base tree.
   `--dry-run` stops here and only prints the title and body.
3. Fetch the base and the refresh branch; if the branch carries commits the bot did not make, stop and
   comment (Renovate's "Edited/Blocked") instead of rewriting someone else's work.
4. Build the commits off to the side (temporary index), push them with a lease on the sha inspected in
   step 3; a lost race means re-fetch and re-check once, never overwrite.
5. Create or update the single PR for the branch; draft and labels follow the legs' outcome.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from research_dispatch.config import PRSettings, Settings, load_settings, load_topics
from research_dispatch.errors import BadInput, PublishError
from research_dispatch.fsio import confined, write_atomic
from research_dispatch.ghactions import append_step_summary
from research_dispatch.plan import Leg, plan_legs
from research_dispatch.publish import prbody
from research_dispatch.publish.collect import (
    LegEntry,
    collect_legs,
    report_message,
    safe_run_link,
    stray_files,
    synthesis_cost,
    synthesis_message,
)
from research_dispatch.publish.gitops import CommitInfo, CommitSpec, FileSpec, Git, Identity, LeaseRejected
from research_dispatch.publish.pulls import GitHubTarget, PullRequests, Retrier, describe, require_target
from research_dispatch.redact import KEY_VARIABLES, redacting, register_env

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
    failed_legs: list[str] = field(default_factory=list)
    unverified_legs: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return 1 if self.operation == "blocked" else 0


@dataclass
class _Plan:
    """What this publish would commit and say, computed against one base commit."""

    base_sha: str
    entries: list[LegEntry]
    specs: list[CommitSpec]
    synthesis_changed: list[str]
    title: str
    body: str
    draft: bool

    @property
    def empty(self) -> bool:
        return not self.specs


def resolve_identity(settings: PRSettings, env: Mapping[str, str]) -> Identity:
    """The bot identity; `GIT_AUTHOR_NAME`/`GIT_AUTHOR_EMAIL` override the configured one."""
    return Identity(name=env.get("GIT_AUTHOR_NAME", "").strip() or settings.bot_name,
                    email=env.get("GIT_AUTHOR_EMAIL", "").strip() or settings.bot_email)


def run_link_from_env(env: Mapping[str, str]) -> str | None:
    server = (env.get("GITHUB_SERVER_URL") or "https://github.com").rstrip("/")
    repository, run_id = env.get("GITHUB_REPOSITORY", ""), env.get("GITHUB_RUN_ID", "")
    if repository and run_id.isdigit():
        return safe_run_link(f"{server}/{repository}/actions/runs/{run_id}")
    return None


def _check_ref(name: str, option: str) -> None:
    if (not name or name.startswith(("-", "/")) or name.endswith(("/", ".", ".lock")) or ".." in name
            or "//" in name or "@{" in name or any(ch in name for ch in " ~^:?*[\\") or len(name) > 200
            or any(ord(ch) < 33 for ch in name)):
        raise BadInput(f"{name!r} is not a safe branch name", path=option)


def _prepare(git: Git, repo: Path, settings: Settings, entries: list[LegEntry], *, cycle: str, branch: str,
             base: str, base_sha: str, run_link: str | None, secrets: list[str],
             warnings: list[str]) -> _Plan:
    """Decide what changed against base_sha, and render the commit messages, title and body."""
    for entry in entries:
        entry.changed = False
    leg_files = {e.stem: e.files(git.repo) for e in entries}
    synth_candidates = []
    for rel in settings.synthesis_relpaths():
        path = repo / rel
        if path.is_symlink():
            warnings.append(f"{rel} is a symbolic link; not committed")
        elif path.is_file():
            confined(repo, rel)
            synth_candidates.append(rel)
    all_rel = [rel for files in leg_files.values() for rel in files] + synth_candidates
    work = dict(zip(all_rel, git.hash_files([git.tree_path(r) for r in all_rel], write=False), strict=True))
    base_blobs = git.blob_shas(base_sha, [git.tree_path(rel) for rel in all_rel])

    def changed(rel: str) -> bool:
        return base_blobs.get(git.tree_path(rel)) != work[rel]

    specs: list[CommitSpec] = []
    for entry in entries:
        files = leg_files[entry.stem]
        entry.changed = any(changed(rel) for rel in files)
        if entry.changed:
            specs.append(CommitSpec(files=tuple(FileSpec(git.tree_path(rel)) for rel in files),
                                    message=report_message(entry, cycle, run_link)))
    reports = len(specs)
    synthesis_changed = [rel for rel in synth_candidates if changed(rel)]
    if synthesis_changed:
        specs.append(CommitSpec(files=tuple(FileSpec(git.tree_path(rel)) for rel in synthesis_changed),
                                message=synthesis_message(synthesis_changed, cycle, run_link,
                                                          sum(1 for e in entries if e.report is not None))))
    failed = [e for e in entries if e.failed]
    unverified = [e for e in entries if e.unverified]
    title = prbody.render_title(cycle, reports=reports, synthesis=bool(synthesis_changed), failed=len(failed),
                                unverified=len(unverified))
    ledger = settings.ledger_relpath
    diff, diff_short, note = prbody.claim_diff(git.read_blob(base_sha, git.tree_path(ledger)), repo / ledger, ledger)
    facts = prbody.BodyFacts(cycle=cycle, branch=branch, base=base, base_sha=base_sha, entries=entries,
                             synthesis_changed=synthesis_changed,
                             framework_doc=settings.document_relpath,
                             claim_diff=diff, claim_diff_short=diff_short, claim_note=note, run_link=run_link,
                             synthesis_cost_usd=synthesis_cost(repo, settings) if synthesis_changed else 0.0)
    body = prbody.render_body(facts, secrets=secrets)
    return _Plan(base_sha=base_sha, entries=entries, specs=specs, synthesis_changed=synthesis_changed,
                 title=title, body=body, draft=bool(failed or unverified))


class _Publisher:
    """One publish run; holds the shared state so each step stays small."""

    def __init__(self, repo: Path, settings: Settings, *, cycle: str, branch: str, base: str, push: bool,
                 open_pr: bool, env: Mapping[str, str], log: Callable[[str], None],
                 sleep: Callable[[float], None], target: GitHubTarget | None) -> None:
        self.repo, self.settings, self.cycle, self.branch, self.base = repo, settings, cycle, branch, base
        self.push, self.open_pr, self.env, self.log, self.sleep = push, open_pr, env, log, sleep
        self.target = target
        self.remote = settings.pr.remote
        self.git = Git(repo, env, resolve_identity(settings.pr, env))
        self.run_link = run_link_from_env(env)
        self.secrets = [v for k in KEY_VARIABLES if len(v := env.get(k, "")) >= 6]
        self.warnings: list[str] = []
        self._client: PullRequests | None = None

    # -- helpers --------------------------------------------------------------------------------
    @property
    def client(self) -> PullRequests | None:
        if self.target is not None and self._client is None:
            self._client = PullRequests(self.target, self.settings.pr,
                                        Retrier(self.settings.pr, sleep=self.sleep, log=self.log))
        return self._client

    def result(self, plan: _Plan | None, operation: Operation, **kwargs: Any) -> PublishResult:
        entries = plan.entries if plan else []
        values: dict[str, Any] = {
            "branch": self.branch, "base": self.base, "cycle": self.cycle, "commits": [], "pushed": False,
            "pr_number": None, "pr_url": None, "operation": operation, "draft": bool(plan and plan.draft),
            "title": plan.title if plan else "", "body": plan.body if plan else "", "body_path": None,
            "warnings": self.warnings, "failed_legs": [e.stem for e in entries if e.failed],
            "unverified_legs": [e.stem for e in entries if e.unverified]}
        values.update(kwargs)
        return PublishResult(**values)

    def save_body(self, plan: _Plan) -> Path:
        path = confined(self.repo, f"{self.settings.build_dir}/{BODY_FILE}")
        write_atomic(path, plan.body)
        return path

    def prepare(self, base_sha: str, entries: list[LegEntry]) -> _Plan:
        return _prepare(self.git, self.repo, self.settings, entries, cycle=self.cycle, branch=self.branch,
                        base=self.base, base_sha=base_sha, run_link=self.run_link, secrets=self.secrets,
                        warnings=self.warnings)

    def local_base(self) -> str:
        sha = self.git.rev(f"refs/heads/{self.base}") or self.git.rev(f"refs/remotes/{self.remote}/{self.base}")
        if sha is None:
            raise BadInput(f"base branch {self.base!r} not found (neither refs/heads/{self.base} nor "
                           f"refs/remotes/{self.remote}/{self.base})", path="--base")
        return sha

    def fetch(self) -> tuple[str, str | None]:
        """Fetch base and branch from the remote; return (base sha, remote branch sha or None)."""
        heads = self.git.ls_remote_heads(self.remote, [self.base, self.branch])
        if self.base not in heads:
            raise BadInput(f"base branch {self.base!r} does not exist on remote {self.remote!r}", path="--base")
        specs = [f"+refs/heads/{self.base}:refs/remotes/{self.remote}/{self.base}"]
        if self.branch in heads:
            specs.append(f"+refs/heads/{self.branch}:refs/remotes/{self.remote}/{self.branch}")
        self.git.fetch(self.remote, specs)
        base_sha = self.git.rev(f"refs/remotes/{self.remote}/{self.base}")
        tip = self.git.rev(f"refs/remotes/{self.remote}/{self.branch}") if self.branch in heads else None
        if base_sha is None:
            raise PublishError(f"fetching {self.base!r} from {self.remote!r} left no commit to build on")
        return base_sha, tip

    def ensure_not_checked_out(self) -> None:
        if f"refs/heads/{self.branch}" in self.git.checked_out_branches():
            raise PublishError(f"branch {self.branch!r} is checked out in a worktree; switch to another branch "
                               "first (publish never touches your working tree) or pass --branch")

    def build(self, plan: _Plan, tip: str | None) -> tuple[list[str], bool]:
        """Commit shas on base; reuse the branch's own commits when they already say the same."""
        shas = self.git.build_chain(plan.base_sha, plan.specs)
        if tip is not None and self.git.same_chain(plan.base_sha, tip, shas):
            return [c.sha for c in self.git.commits_between(plan.base_sha, tip)], True
        return shas, False

    def subjects(self, plan: _Plan) -> list[str]:
        return [spec.message.split("\n", 1)[0] for spec in plan.specs]

    # -- flows ----------------------------------------------------------------------------------
    def blocked(self, plan: _Plan, where: str, tip: str, foreign: list[CommitInfo]) -> PublishResult:
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
        return self.result(plan, "blocked", pr_number=number, pr_url=url, body_path=self.save_body(plan),
                           message=message)

    def local_only(self, entries: list[LegEntry]) -> PublishResult:
        plan = self.prepare(self.local_base(), entries)
        if plan.empty:
            return self.result(plan, "none", message="nothing to publish: no report or synthesis file differs "
                                                     f"from {self.base}")
        local_tip = self.git.rev(f"refs/heads/{self.branch}")
        if local_tip is not None:
            foreign = self.git.foreign_commits(plan.base_sha, local_tip)
            if foreign:
                return self.blocked(plan, "local", local_tip, foreign)
        self.ensure_not_checked_out()
        shas, reused = self.build(plan, local_tip)
        if shas[-1] != local_tip:
            self.git.update_ref(f"refs/heads/{self.branch}", shas[-1], local_tip,
                                f"research-dispatch: publish {self.cycle}")
        note = "already up to date" if reused else f"{len(shas)} commit(s)"
        return self.result(plan, "none", commits=shas, subjects=self.subjects(plan), body_path=self.save_body(plan),
                           message=f"committed to local branch {self.branch} ({note}); not pushed")

    def pushed(self, entries: list[LegEntry]) -> PublishResult:
        url = self.git.remote_url(self.remote)
        if url is None:
            raise BadInput(f"no git remote {self.remote!r} to push to; add one or pass --no-push",
                           path="pr.remote")
        token = self.env.get("GITHUB_TOKEN", "").strip()
        if token:
            self.git.use_token_for(url, token)
        for attempt in (1, 2):
            base_sha, tip = self.fetch()
            plan = self.prepare(base_sha, entries)
            if plan.empty:
                return self.result(plan, "none", message="nothing to publish: no report or synthesis file "
                                                         f"differs from {self.remote}/{self.base}")
            local_tip = self.git.rev(f"refs/heads/{self.branch}")
            for where, head in (("remote", tip), ("local", local_tip)):
                foreign = self.git.foreign_commits(base_sha, head) if head else []
                if foreign and head:
                    return self.blocked(plan, where, head, foreign)
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
            return self.open_or_update(plan, shas, pushed=not reused)
        raise AssertionError("unreachable")  # pragma: no cover

    def closed_cycle(self) -> str | None:
        """Closing the PR skips the cycle (the body says so): a closed, unmerged PR and no open one."""
        client = self.client
        if client is None or client.find_open(self.branch, self.base):
            return None
        closed = client.find_closed_unmerged(self.branch, self.base)
        if not closed:
            return None
        return (f"nothing published: PR #{closed[-1].number} for {self.branch} was closed without merging, which "
                "skips this cycle; reopen it to let the bot update it")

    def open_or_update(self, plan: _Plan, shas: list[str], *, pushed: bool) -> PublishResult:
        from github import GithubException

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
            self.warnings += warnings
            client.set_draft(pr, plan.draft)
            labels = list(self.settings.pr.labels) + ([PARTIAL_LABEL] if any(e.failed for e in plan.entries) else [])
            client.sync_labels(pr, labels, managed=[PARTIAL_LABEL])
        except GithubException as exc:
            raise PublishError(f"GitHub: {describe(exc)} (the branch was {state}; re-run to retry the PR)") from None
        draft = " (draft)" if plan.draft else ""
        return self.result(plan, operation, pr_number=pr.number, pr_url=pr.html_url,
                           message=f"{self.branch} {state}; PR #{pr.number} {operation}{draft}", **common)


def publish(repo: Path, settings: Settings, *, cycle: str, branch: str | None = None, base: str | None = None,
            push: bool = True, open_pr: bool = True, dry_run: bool = False, env: Mapping[str, str] | None = None,
            legs: list[Leg] | None = None, log: Callable[[str], None] | None = None,
            sleep: Callable[[float], None] = time.sleep) -> PublishResult:
    """Publish the refresh: commits, leased push, PR upsert. See the module docstring for the order.

    Raises `BadInput` (exit 2: bad option, missing token or repository, no remote) and `PublishError`
    (exit 1: git or GitHub failed for good). A branch edited by someone else is not an exception: the
    result's `operation` is "blocked" and its `exit_code` 1.
    """
    env = dict(os.environ if env is None else env)
    register_env(env)  # keys that live only in `env` are redacted everywhere too
    repo = Path(repo)
    base_name = base or settings.pr.base
    branch_name = branch or f"{settings.pr.branch_prefix}{cycle}"
    _check_ref(base_name, "--base")
    _check_ref(branch_name, "--branch")
    if branch_name == base_name:
        raise BadInput(f"the refresh branch cannot be the base branch ({base_name!r})", path="--branch")
    target = require_target(env) if (open_pr and push and not dry_run) else None
    if legs is None:
        legs = plan_legs(load_topics(repo, settings), settings)
    publisher = _Publisher(repo, settings, cycle=cycle, branch=branch_name, base=base_name, push=push,
                           open_pr=open_pr, env=env, log=log or (lambda _m: None), sleep=sleep, target=target)
    publisher.git.check_repository()
    if not publisher.git.valid_branch(branch_name):
        raise BadInput(f"{branch_name!r} is not a valid git branch name", path="--branch")
    entries = collect_legs(repo, settings, legs, cycle)
    for rel in stray_files(repo, settings, entries):
        publisher.warnings.append(f"{rel} is not a computed report or synthesis path; not committed")
    if dry_run:
        plan = publisher.prepare(publisher.local_base(), entries)
        message = "dry run: nothing was committed, pushed or sent"
        if plan.empty:
            message += f"; nothing differs from {base_name}, so a real run would publish nothing"
        return publisher.result(plan, "dry-run", subjects=publisher.subjects(plan), message=message)
    if not push:
        return publisher.local_only(entries)
    return publisher.pushed(entries)


def summary_lines(result: PublishResult) -> list[str]:
    lines = [f"publish: {result.branch} → {result.base} (cycle {result.cycle})"]
    if result.commits:
        lines.append(f"commits: {len(result.commits)}")
        lines += [f"  {sha[:10]} {subject}" for sha, subject in zip(result.commits, result.subjects, strict=False)]
    lines.append(f"pushed: {'yes' if result.pushed else 'no'}")
    if result.pr_number is not None:
        draft = ", draft" if result.draft else ""
        lines.append(f"pull request: #{result.pr_number} {result.operation}{draft} {result.pr_url or ''}".rstrip())
    if result.failed_legs:
        lines.append("failed or missing legs: " + ", ".join(result.failed_legs))
    if result.unverified_legs:
        lines.append("unverified routes: " + ", ".join(result.unverified_legs))
    if result.body_path is not None:
        lines.append(f"body: {result.body_path}")
    lines += [f"warning: {w}" for w in result.warnings]
    if result.message:
        lines.append(result.message)
    return lines


def publish_command(repo: Path, *, branch: str | None, base: str | None, push: bool, open_pr: bool, dry_run: bool,
                    cycle: str, env: Mapping[str, str], echo: Callable[[str], None],
                    github_summary: bool = False, legs: list[Leg] | None = None) -> int:
    """The CLI's `publish`: run, print a short summary (or, with --dry-run, the title and body)."""
    settings = load_settings(repo)
    say = redacting(echo, env)

    result = publish(repo, settings, cycle=cycle, branch=branch, base=base, push=push, open_pr=open_pr,
                     dry_run=dry_run, env=env, legs=legs, log=say)
    if dry_run:
        say(result.title)
        say("")
        say(result.body)
        for warning in result.warnings:
            say(f"warning: {warning}")
        say(result.message)
        if github_summary:
            append_step_summary(env, f"## Pull request preview (dry run)\n\n**{result.title}**\n\n{result.body}")
        return 0
    for line in summary_lines(result):
        say(line)
    if github_summary:
        append_step_summary(env, "## Pull request\n\n" + "\n".join(f"- {line}" for line in summary_lines(result)))
    return result.exit_code
