"""The pull request through PyGithub: one PR per cycle branch, upserted, with bounded retries.

Why our own retries (PyGithub's `retry=None`): GitHub faults must end in exactly one PR and a clear
message, within a known time. 5xx answers, dropped connections and rate limits are retried a bounded
number of times under the retry policy of every outbound call (`core/retry.py`), waiting for
`Retry-After` or the rate-limit reset when GitHub gives one, but never longer than `pr.api_max_wait_s`
per wait; the sleep is injectable so tests never wait.

What GitHub may refuse, and why publishing still succeeds: draft pull requests do not exist in private
repositories on some plans (`POST /pulls` with `draft: true` answers 422 "Draft pull requests are not
supported in this repository."), the draft conversions are GraphQL mutations that the Actions
`GITHUB_TOKEN` may not run (HTTP 200 with `errors: [{type: FORBIDDEN}]`, which PyGithub raises as
`GithubException`), and creating a label needs `issues: write`. Each becomes one *note* (said once by
the caller); the partial state then lives in the label, the title and the body.

Why re-listing after a failed create: a 5xx (or a dropped connection) may hide a PR that was created
all the same; the retry then gets 422 "A pull request already exists", and the answer is to find that
PR and update it. Never a second PR: the open PR for `owner:branch` into the base is always looked up
first.
"""

from __future__ import annotations

import functools
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urlsplit

from github import Auth, BadCredentialsException, Github, GithubException
from requests.exceptions import ConnectionError as RequestsConnectionError
from requests.exceptions import Timeout

from research_dispatch.config import environment
from research_dispatch.config.settings import PRSettings
from research_dispatch.core.errors import BadInput, CallTimedOut, PublishError, ResponseTooLarge
from research_dispatch.core.retry import Decision, Failure, GiveUp
from research_dispatch.publish.github_http import use_bounded_connections

T = TypeVar("T")
_REPOSITORY = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]{1,100}$")


@dataclass(frozen=True)
class GitHubTarget:
    api_url: str
    repository: str  # owner/name
    token: str

    @property
    def owner(self) -> str:
        return self.repository.split("/", 1)[0]


def require_target(env: Mapping[str, str]) -> GitHubTarget:
    """GITHUB_TOKEN, GITHUB_REPOSITORY and GITHUB_API_URL, checked before any network call. The token and
    the API URL are read by `environment` (the one place for keys and base URLs: one token, https or
    http to a loopback address); the repository name here."""
    credentials = environment.require(env, environment.GITHUB)
    repository = env.get("GITHUB_REPOSITORY", "").strip()
    if not repository:
        raise BadInput("GITHUB_REPOSITORY is not set; it names the repository (owner/name) for the pull request",
                       path="environment", field="GITHUB_REPOSITORY")
    if not _REPOSITORY.fullmatch(repository):
        raise BadInput(f"{repository!r} is not owner/name", path="environment", field="GITHUB_REPOSITORY")
    return GitHubTarget(api_url=credentials.base_url, repository=repository, token=credentials.key)


class Retrier:
    """GitHub calls under the retry policy (`core/retry.py`, `pr.api_*`); an error that is not a GitHub
    fault worth retrying passes through unchanged, one that stays ends as a `PublishError` that says why."""

    def __init__(self, settings: PRSettings, *, sleep: Callable[[float], None] = time.sleep,
                 log: Callable[[str], None] | None = None, clock: Callable[[], float] = time.time) -> None:
        self.policy = settings.retry_policy(sleep)
        self.log = log or (lambda _message: None)
        self.clock = clock
        self.waits: list[float] = []

    def __call__(self, what: str, call: Callable[[], T]) -> T:
        def retrying(failure: Failure, number: int, wait: float) -> None:
            self.log(f"GitHub: {failure.reason} while trying to {what}; retry {number}/{self.policy.max_retries} in "
                     f"{wait:.1f} s")
            self.waits.append(wait)

        def give_up(_exc: Exception, failure: Failure, decision: Decision, attempts: int) -> PublishError:
            if decision.give_up is GiveUp.NOT_RETRYABLE:
                return PublishError(f"GitHub: could not {what}: {failure.reason}")
            if decision.give_up is GiveUp.WAIT_TOO_LONG:
                return PublishError(f"GitHub: could not {what}: {failure.reason}; GitHub asks to wait "
                                    f"{decision.wait_s:.0f} s, more than the {self.policy.max_wait_s:.0f} s this run "
                                    "waits (pr.api_max_wait_s); re-run later")
            return PublishError(f"GitHub: could not {what}: {failure.reason}, still failing after {attempts} "
                                "attempt(s); re-run later")

        return self.policy.call(call, self._failure, retrying=retrying, give_up=give_up)

    def _failure(self, exc: Exception) -> Failure | None:
        """A GitHub fault worth retrying in the policy's terms (None: not one; raised as it is): 5xx, a
        rate limit (with GitHub's Retry-After or reset when it gives one; a secondary limit waits at least
        a minute, as GitHub asks), a dropped connection or a timeout; a call past its whole-call deadline
        is retried as a timeout, an answer past the size cap is not retried (`github_http`)."""
        if isinstance(exc, (RequestsConnectionError, Timeout)):
            return Failure(True, reason=f"connection error ({type(exc).__name__})")
        if isinstance(exc, CallTimedOut):
            return Failure(True, reason="no complete answer within pr.api_timeout_s")
        if isinstance(exc, ResponseTooLarge):
            return Failure(False, reason=str(exc))
        if not isinstance(exc, GithubException):
            return None
        status = int(getattr(exc, "status", 0) or 0)
        headers = {str(k).lower(): str(v) for k, v in (getattr(exc, "headers", None) or {}).items()}
        message = _message(exc)
        exhausted = headers.get("x-ratelimit-remaining") == "0"
        rate_limited = status == 429 or (status == 403 and ("rate limit" in message.lower() or exhausted))
        if not (rate_limited or status >= 500):
            return None
        reason = f"rate limit ({status})" if rate_limited else f"HTTP {status}"
        retry_after = headers.get("retry-after", "").strip()
        reset = headers.get("x-ratelimit-reset", "")
        if retry_after.isdigit():
            return Failure(True, retry_after_s=float(retry_after), reason=reason)
        if rate_limited and exhausted and reset.isdigit():
            return Failure(True, retry_after_s=max(0.0, float(reset) - self.clock() + 1.0), reason=reason)
        if rate_limited and "secondary" in message.lower():
            return Failure(True, at_least_s=60.0, reason=reason)
        return Failure(True, reason=reason)


def _message(exc: Any) -> str:
    data = getattr(exc, "data", None)
    if isinstance(data, dict):
        parts = [str(data.get("message", ""))]
        for error in data.get("errors") or []:
            if isinstance(error, dict) and error.get("message"):
                parts.append(str(error["message"]))
        return " — ".join(p for p in parts if p)
    return str(data or exc)


def _refused_by_design(exc: Any) -> bool:
    """GraphQL FORBIDDEN (HTTP 200 + errors, raised by PyGithub as a 400), a 403, or drafts unsupported."""
    data = getattr(exc, "data", None)
    errors = data.get("errors") if isinstance(data, dict) else None
    if isinstance(errors, list) and any(isinstance(e, dict) and e.get("type") == "FORBIDDEN" for e in errors):
        return True
    message = _message(exc).lower()
    return getattr(exc, "status", 0) == 403 or "not supported" in message or "not accessible" in message


def describe(exc: Any) -> str:
    return f"HTTP {getattr(exc, 'status', '?')}: {_message(exc)}"


def open_repository(target: GitHubTarget, settings: PRSettings, retry: Retrier) -> tuple[Github, Any]:
    """The client and the repository through the real PyGithub client (bounded retries are `retry`'s); a
    refused token is exit 2 naming GITHUB_TOKEN, any other failure a `PublishError`. The caller closes the
    client when done (a command is one of many in a process); on failure it is closed here."""
    loopback = environment.is_loopback(urlsplit(target.api_url).hostname or "")
    # PyGithub's own throttling protects github.com's secondary limits; a loopback fake has none.
    use_bounded_connections()  # every response read under a whole-call deadline and a size cap
    gh = Github(base_url=target.api_url, auth=Auth.Token(target.token), timeout=int(settings.api_timeout_s),
                retry=None, seconds_between_requests=None if loopback else 0.25,
                seconds_between_writes=None if loopback else 1.0)
    try:
        return gh, retry("read the repository", lambda: gh.get_repo(target.repository))
    except BaseException as exc:
        gh.close()  # nobody else holds the client yet
        if isinstance(exc, BadCredentialsException):
            raise BadInput("GitHub rejected the token (401 Bad credentials)", path="environment",
                           field="GITHUB_TOKEN") from None
        if isinstance(exc, GithubException):
            raise PublishError(f"GitHub: cannot read {target.repository}: {describe(exc)}") from None
        raise


class PullRequests:
    """The repository's pull requests for one refresh branch, through the real PyGithub client."""

    def __init__(self, target: GitHubTarget, settings: PRSettings, retry: Retrier) -> None:
        self.target = target
        self.settings = settings
        self.retry = retry
        self.notes: list[str] = []  # what GitHub could not do, for the caller to say once
        self.gh, self.repo = open_repository(target, settings, retry)

    def close(self) -> None:
        """Close the client's connections (its owner does, when done: a command is one of many in a process)."""
        self.gh.close()

    def __enter__(self) -> PullRequests:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _list(self, state: str, branch: str, base: str) -> list[Any]:
        head = f"{self.target.owner}:{branch}"
        pulls = self.retry(f"list {state} pull requests",
                           lambda: list(self.repo.get_pulls(state=state, head=head, base=base)))
        return sorted(pulls, key=lambda pr: pr.number)

    def find_open(self, branch: str, base: str) -> list[Any]:
        return self._list("open", branch, base)

    def find_closed_unmerged(self, branch: str, base: str) -> list[Any]:
        return [pr for pr in self._list("closed", branch, base) if pr.merged_at is None]

    def closed_cycle(self, branch: str, base: str) -> Any | None:
        """The PR whose closing skips this cycle: the latest closed, unmerged PR of the branch when none is
        open (closing the PR is how a reviewer says "not this cycle"; reopening it hands it back)."""
        if self.find_open(branch, base):
            return None
        closed = self.find_closed_unmerged(branch, base)
        return closed[-1] if closed else None

    def upsert(self, *, branch: str, base: str, title: str, body: str, draft: bool) -> tuple[Any, str, list[str]]:
        """Create the PR or update the open one; returns (pr, "created"|"updated", warnings)."""
        warnings: list[str] = []
        existing = self.find_open(branch, base)
        if len(existing) > 1:
            warnings.append("several open PRs for this branch: updating #" + str(existing[0].number)
                            + " (" + ", ".join(f"#{p.number}" for p in existing[1:]) + " left alone)")
        if existing:
            pr = existing[0]
            self._edit(pr, title, body)
            return pr, "updated", warnings
        try:
            pr = self._create(branch=branch, base=base, title=title, body=body, draft=draft)
        except GithubException as exc:
            if exc.status != 422 or "already exists" not in _message(exc):
                raise PublishError(f"GitHub: could not create the pull request: {describe(exc)}") from None
            found = self.find_open(branch, base)  # a lost response: the PR exists after all
            if not found:
                raise PublishError(f"GitHub says a pull request already exists for {branch}, but none is open "
                                   "into this base; check the repository's pull requests") from None
            pr = found[0]
            warnings.append(f"PR #{pr.number} already existed (a previous answer was lost); updated it")
            self._edit(pr, title, body)
            return pr, "created", warnings
        if self.settings.reviewers:
            try:
                reviewers = list(self.settings.reviewers)
                self.retry("request reviewers", lambda: pr.create_review_request(reviewers=reviewers))
            except (GithubException, PublishError) as exc:
                detail = describe(exc) if isinstance(exc, GithubException) else str(exc)
                warnings.append(f"could not request reviewers: {detail}")
        return pr, "created", warnings

    def _create(self, *, branch: str, base: str, title: str, body: str, draft: bool) -> Any:
        """Create the PR; where GitHub does not support drafts, create it ready and note why."""
        def create(as_draft: bool) -> Any:
            return self.retry("create the pull request", lambda: self.repo.create_pull(
                base=base, head=branch, title=title, body=body, draft=as_draft, maintainer_can_modify=True))

        try:
            return create(draft)
        except GithubException as exc:
            if not (draft and exc.status == 422 and "draft pull requests are not supported" in _message(exc).lower()):
                raise
        self._note("GitHub does not support draft pull requests in this repository (422 \"Draft pull requests are "
                   "not supported in this repository.\"): the PR is open for review, and its partial state is "
                   "carried by the `partial` label, the title and the body")
        return create(False)

    def _note(self, note: str) -> None:
        if note not in self.notes:
            self.notes.append(note)

    def _edit(self, pr: Any, title: str, body: str) -> None:
        try:
            self.retry("update the pull request", lambda: pr.edit(title=title, body=body))
        except GithubException as exc:
            raise PublishError(f"GitHub: could not update PR #{pr.number}: {describe(exc)}") from None

    def set_draft(self, pr: Any, draft: bool) -> list[str]:
        """Drafts change only through GraphQL; PATCH ignores `draft`. Returns notes (never raises for a
        refusal GitHub makes by design: FORBIDDEN for the Actions token, drafts unsupported)."""
        if bool(pr.draft) == draft:
            return []
        what = "convert the pull request to a draft" if draft else "mark the pull request ready for review"
        try:
            self.retry(what, pr.convert_to_draft if draft else pr.mark_ready_for_review)
        except GithubException as exc:
            if not _refused_by_design(exc):
                raise PublishError(f"GitHub: could not {what}: {describe(exc)}") from None
            state = "partial" if draft else "complete"
            note = (f"GitHub refused to {what} ({_message(exc) or 'FORBIDDEN'}; the Actions GITHUB_TOKEN may not run "
                    "this GraphQL mutation, a GitHub App token may): the PR stays "
                    f"{'ready for review' if draft else 'a draft'}, and the label, the title and the body say it "
                    f"is {state}")
            self._note(note)
            return [note]
        return []

    def sync_labels(self, pr: Any, wanted: Sequence[str], managed: Sequence[str]) -> list[str]:
        """Add the wanted labels (GitHub creates unknown ones); drop bot-managed ones no longer wanted.

        A label that cannot be added (creating it needs `issues: write`) is a note, never a failure."""
        current = {label.name.lower() for label in pr.labels}
        missing = [name for name in dict.fromkeys(wanted) if name.lower() not in current]
        refused: list[str] = []
        reason = ""
        if missing:
            try:
                self.retry("add labels", lambda: pr.add_to_labels(*missing))
            except GithubException as exc:
                if exc.status not in (403, 404, 422):
                    raise PublishError(f"GitHub: could not set labels on PR #{pr.number}: {describe(exc)}") from None
                for name in missing:  # one by one: existing labels can still be added
                    try:
                        self.retry("add a label", functools.partial(pr.add_to_labels, name))
                    except GithubException as one:
                        if one.status not in (403, 404, 422):
                            raise PublishError(f"GitHub: could not set labels on PR #{pr.number}: "
                                               f"{describe(one)}") from None
                        refused.append(name)
                        reason = describe(one)
        wanted_lower = {name.lower() for name in wanted}
        try:
            for name in managed:
                if name.lower() in current and name.lower() not in wanted_lower:
                    self.retry("remove a label", functools.partial(pr.remove_from_labels, name))
        except GithubException as exc:
            raise PublishError(f"GitHub: could not remove a label on PR #{pr.number}: {describe(exc)}") from None
        if not refused:
            return []
        note = (f"GitHub refused the label(s) {', '.join(f'`{n}`' for n in refused)} ({reason}; creating a label "
                "needs `issues: write`): the title and the body carry the state")
        self._note(note)
        return [note]

    def comment_once(self, pr: Any, key: str, body: str) -> bool:
        """Post `body` unless a comment carrying `key` (a hidden marker) is already there."""
        try:
            comments = self.retry("read comments", lambda: list(pr.get_issue_comments()))
            if any(key in (c.body or "") for c in comments):
                return False
            self.retry("comment on the pull request", lambda: pr.create_issue_comment(body))
        except GithubException as exc:
            raise PublishError(f"GitHub: could not comment on PR #{pr.number}: {describe(exc)}") from None
        return True
