"""The publish stage's checks, in one place: what publishing needs from git, the remote and GitHub.

The publisher (`publish/command.py`) makes them as it publishes; `run` makes them through `preflight`
before any leg spends money — the same checks, by the same functions, so the two can never disagree
about whether a refresh could be published:

* a git work tree with a commit, and the refresh branch not checked out in a worktree;
* the base branch (`pr.base`): locally, or with `--push` on the remote — which must be reachable;
* with `--push`, the GitHub token and API URL (`environment`) and the repository name;
* no commit on the refresh branch (local, and remote with `--push`) that the bot did not make:
  publish would refuse to overwrite it, so the legs' money would buy nothing;
* with `--push`, no closed, unmerged PR of the cycle (and none open): closing it skips the cycle, so
  publish would push nothing — said before the legs, with what to do (exit 2 naming `--cycle`).

Bad settings or environment are `BadInput` (exit 2); an unreachable remote or a branch someone else
committed to is `PublishError` (exit 1). Every question to git is read-only here.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from research_dispatch.config.settings import PRSettings, Settings
from research_dispatch.core.errors import BadInput, PublishError
from research_dispatch.core.sanitize import one_line
from research_dispatch.publish.gitops import Git, Identity
from research_dispatch.publish.pulls import GitHubTarget, PullRequests, Retrier, require_target


def resolve_identity(settings: PRSettings, env: Mapping[str, str]) -> Identity:
    """The bot identity; `GIT_AUTHOR_NAME`/`GIT_AUTHOR_EMAIL` override the configured one."""
    return Identity(name=env.get("GIT_AUTHOR_NAME", "").strip() or settings.bot_name,
                    email=env.get("GIT_AUTHOR_EMAIL", "").strip() or settings.bot_email)


def publisher_git(repo: Path, settings: Settings, env: Mapping[str, str]) -> Git:
    """The publisher's git (`publish/gitops.py`: argument lists, a controlled environment, keys redacted)."""
    return Git(repo, env, resolve_identity(settings.pr, env))


def ensure_not_checked_out(git: Git, branch: str, remedy: str) -> None:
    """Publishing moves the refresh branch's ref, so no worktree may have it checked out."""
    if f"refs/heads/{branch}" in git.checked_out_branches():
        raise PublishError(f"branch {branch!r} is checked out in a worktree; switch to another branch first "
                           f"(publish never touches your working tree){remedy}")


def base_commit(git: Git, base: str, remote: str, *, option: str, local: bool = True) -> str:
    """The base branch's commit: local or remote-tracking (`local=False`: remote-tracking only, as just
    fetched). Missing is bad input naming `option` (`--base`, or `pr.base` for `run`)."""
    sha = (git.rev(f"refs/heads/{base}") if local else None) or git.rev(f"refs/remotes/{remote}/{base}")
    if sha is None and git.rev("HEAD") is None:  # right after `init`: what to do is commit first
        raise BadInput(f"the repository has no commit yet, so there is no base branch {base!r} to publish onto: "
                       "commit first (git add -A && git commit -m \"Set up research-dispatch\"), then run this "
                       "again", path=option)
    if sha is None:
        raise BadInput(f"base branch {base!r} not found (neither refs/heads/{base} nor "
                       f"refs/remotes/{remote}/{base})", path=option)
    return sha


def remote_heads(git: Git, remote: str, base: str, branch: str, *, option: str) -> dict[str, str]:
    """The remote's heads of the base and the refresh branch (`ls-remote`, a `PublishError` when the remote
    does not answer); a base missing there is bad input naming `option`."""
    heads = git.ls_remote_heads(remote, [base, branch])
    if base not in heads:
        raise BadInput(f"base branch {base!r} does not exist on remote {remote!r}", path=option)
    return heads


def fetch_heads(git: Git, remote: str, base: str, branch: str, heads: Mapping[str, str]) -> str | None:
    """Fetch the base and (where the remote has it) the refresh branch into remote-tracking refs; return
    the remote branch's tip (None: the remote has no refresh branch)."""
    refspecs = [f"+refs/heads/{base}:refs/remotes/{remote}/{base}"]
    if branch in heads:
        refspecs.append(f"+refs/heads/{branch}:refs/remotes/{remote}/{branch}")
    git.fetch(remote, refspecs)
    return git.rev(f"refs/remotes/{remote}/{branch}") if branch in heads else None


def require_open_cycle(settings: Settings, target: GitHubTarget, branch: str, cycle: str, *, remedy: str) -> None:
    """Refuse (exit 2 naming `--cycle`) a cycle whose PR was closed without merging: closing it skips the
    cycle, so a refresh now would be paid for and never published. Said before any leg, with what to do."""
    with PullRequests(target, settings.pr, Retrier(settings.pr)) as pulls:
        closed = pulls.closed_cycle(branch, settings.pr.base)
    if closed is not None:
        raise BadInput(f"PR #{closed.number} for {branch} was closed without merging, which skips cycle {cycle}: a "
                       "refresh now would be paid for and never published, so no leg was run. Reopen "
                       f"PR #{closed.number} to let the bot update it, name another cycle, or {remedy}",
                       path="--cycle")


def preflight(repo: Path, settings: Settings, env: Mapping[str, str], *, push: bool, cycle: str) -> None:
    """What publishing will need, checked before any leg spends money (the list in the module docstring)."""
    git = publisher_git(repo, settings, env)
    if git.rev("HEAD") is None:
        raise BadInput("not a git repository with a commit to branch from; run `git init` and commit, or pass "
                       "--no-publish", path=str(repo))
    git.check_repository()
    pr = settings.pr
    branch = f"{pr.branch_prefix}{cycle}"
    ensure_not_checked_out(git, branch, ", or pass --no-publish")
    remote_tip: str | None = None
    if push:
        target = require_target(env)  # the token and API URL through `environment`, and the repository
        url = git.remote_url(pr.remote)
        if url is None:
            raise BadInput(f"no git remote {pr.remote!r} to push to; add one or run without --push",
                           path="pr.remote")
        git.use_token_for(url, target.token)
        try:
            heads = remote_heads(git, pr.remote, pr.base, branch, option="pr.base")
        except PublishError as exc:
            raise PublishError(f"remote {pr.remote!r} is not reachable, so the refresh could not be pushed; "
                               f"no leg was run ({exc})") from None
        remote_tip = fetch_heads(git, pr.remote, pr.base, branch, heads)
        require_open_cycle(settings, target, branch, cycle, remedy="run without --push")
    base_sha = base_commit(git, pr.base, pr.remote, option="pr.base", local=not push)
    for where, tip in (("remote", remote_tip), ("local", git.rev(f"refs/heads/{branch}"))):
        foreign = git.foreign_commits(base_sha, tip) if tip else []
        if foreign:
            names = ", ".join(f"{c.sha[:8]} by {one_line(c.author_name, 60)}" for c in foreign[:5])
            raise PublishError(f"the {where} branch {branch} has {len(foreign)} commit(s) the bot did not make "
                               f"({names}); publish would not overwrite them, so no leg was run. Merge or "
                               "remove them, or run with --no-publish")
