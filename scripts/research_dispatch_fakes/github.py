"""An offline GitHub: the REST and GraphQL subset the publish stage drives through PyGithub.

Why it exists: the publish stage pushes a refresh branch with real git and then upserts one pull
request through the real PyGithub client. Testing that against a mock of PyGithub would only test our
idea of PyGithub; this server speaks the wire format PyGithub 2.10 actually sends and parses, so the
client's own URL checks, exception mapping and lazy completion run for real.

What it serves (paths relative to `base_url`, which has no path prefix, like github.com's API root):

* `GET /repos/{o}/{r}`; `GET /user`, `GET /users/{login}`, `GET /rate_limit`.
* Branches and refs: `GET .../branches[/{b}]` (branch names may contain slashes),
  `GET .../git/ref/{ref}`, `GET .../git/refs[/{ref}]`, `GET .../git/matching-refs/{prefix}`,
  `POST .../git/refs`, `PATCH|DELETE .../git/refs/{ref}`, `GET .../git/commits/{sha}`,
  `GET .../commits/{sha-or-branch}`. With `git_dir` (a real bare repository) every ref and commit is
  read live with the `git` CLI, so whatever the product pushed is what the fake sees, and ref writes
  go into that repository (a `force: false` update that is not a fast-forward is refused with 422).
  Without `git_dir` an in-memory ref table seeded with `default_branch` at a fixed sha is used and
  ref updates are accepted unchecked.
* Pulls: `GET|POST .../pulls`, `GET|PATCH .../pulls/{n}`, `GET .../pulls/{n}/merge` (always 404:
  nothing is ever merged). List filters `state`, `head` (`owner:branch`; like GitHub, a `head`
  without an owner is silently ignored), `base`, `sort`, `direction`, `per_page`, `page` (with a real
  `Link` header, which PyGithub's `totalCount` depends on).
* Issues API over the pulls: `GET|PATCH .../issues/{n}`, `GET|POST|PUT|DELETE .../issues/{n}/labels`,
  `DELETE .../issues/{n}/labels/{name}`, `GET|POST .../issues/{n}/comments`,
  `GET|PATCH|DELETE .../issues/comments/{id}`; repo labels `GET|POST .../labels`,
  `GET|PATCH|DELETE .../labels/{name}`. Adding an unknown label to an issue creates it (as GitHub does).
* Issues that are not pull requests, numbered with the pull requests as on GitHub: `POST .../issues`
  (`title` required: 422 missing_field; unknown labels are created, which needs `issues: write`),
  `GET .../issues` (GitHub's list holds pull requests too, each with a `pull_request` key; filters
  `state`, `labels` — comma-separated, every one must be on the item, case-blind — `sort`, `direction`,
  `per_page`, `page`), `GET|PATCH .../issues/{n}` (`state` open or closed, `state_reason` completed,
  not_planned or reopened, else 422; `labels` replaces them), and their comments and labels as above.
* Actions workflows: `GET .../actions/workflows` and `GET .../actions/workflows/{id or file name}` (404
  for a file the default branch does not have), `PUT .../actions/workflows/{id}/enable|disable` (204).
  With `git_dir` the workflows are the `.github/workflows/*.yml` files of the default branch, read live;
  without, the `workflows=` given. Each has a `state` (`active` by default; `set_workflow_state()` or
  the seed's `workflows` sets `disabled_inactivity`, ...): one of GitHub's documented `active`, `deleted`,
  `disabled_fork`, `disabled_inactivity`, `disabled_manually`, anything else a ValueError.
* `POST /graphql`: the `convertPullRequestToDraft` and `markPullRequestReadyForReview` mutations that
  `PullRequest.convert_to_draft()` / `mark_ready_for_review()` send, keyed on the PR `node_id`.
* `GET|POST .../pulls/{n}/requested_reviewers`: a review may be requested only from collaborators
  (`collaborators=`; 422 "Reviews may only be requested from collaborators. ..." otherwise), never from
  the PR's author.

What the repository and the token may do, as on GitHub (constructor arguments, `configure()`, or the
scenario's `settings`):

* `drafts_supported=False` — a private repository on a plan without drafts: `POST /pulls` with
  `draft: true` answers 422 "Draft pull requests are not supported in this repository.", and the
  draft conversion answers a GraphQL error.
* `token_kind="actions"` — the Actions `GITHUB_TOKEN`: the GraphQL draft conversions answer HTTP 200
  with `errors: [{type: FORBIDDEN, message: "Resource not accessible by integration"}]` (PyGithub raises
  `GithubException` for GraphQL errors). `"app"` (default): a GitHub App token, allowed.
* `issues_write=False` — a token without `issues: write`: creating a label (`POST .../labels`, or adding
  a label that does not exist yet to an issue or PR) answers 403 "Resource not accessible by
  integration"; adding existing labels still works (`pull-requests: write` suffices on a PR).
* `read_tokens=(...)` — tokens of jobs granted only read access (the Actions `GITHUB_TOKEN` of a job with
  `pull-requests: read`): they may `GET` (and `HEAD`), and anything else answers 403 "Resource not
  accessible by integration", as GitHub answers a token without write permission.
* `issue_tokens=(...)` — tokens of jobs granted only `issues: write`: they may read, and write issues that
  are not pull requests (create, edit, label, comment) and labels; any other write answers 403.
* `actions_read=False` — a token without `actions: read`: every `.../actions/...` request answers 403
  "Resource not accessible by integration" (what a job whose `permissions:` omit `actions` sees).
* Test hooks (no auth, never scripted): `GET /__fake__/state`, `POST /__fake__/scenario`,
  `POST /__fake__/reset`.

Faithful details the product may trip on: every absolute URL is built from `base_url` (PyGithub
asserts host and port); bodies over 65,536 characters get GitHub's 422; a second open PR for the same
head and base gets GitHub's 422 "A pull request already exists for owner:branch."; with `git_dir`,
creating a PR whose head is missing or has no commits beyond the base gets 422 "No commits between
base and head"; error bodies are `{"message", "documentation_url"}` (+ `errors` on 422), so PyGithub
raises `UnknownObjectException`, `BadCredentialsException` and `RateLimitExceededException` exactly as
against github.com. `PATCH /pulls/{n}` ignores `draft`, as GitHub does: drafts change only via GraphQL.

Scenario format (constructor `scenario=`, `set_scenario()`, or `POST /__fake__/scenario`)::

    {"rules": [{
        "method": "POST",                  # or "*" (default)
        "path": "/repos/*/pulls",          # fnmatch glob on the URL-decoded path ("*" spans "/")
        "on_call": 1,                      # fire on the k-th matching call (1-based), or
        "calls": [1, 3],                   # on these matching calls, or
        "every": 2,                        # on every 2nd matching call; none of the three: every call
        "times": 1,                        # fire at most n times in total
        "status": 502,                     # default 500 (403 with rate_limit / secondary_rate_limit)
        "message": "Server Error",         # default: a GitHub-like message for the status
        "errors": [...],                   # 422 only: the `errors` list (default [])
        "rate_limit": true,                # 403 + x-ratelimit-remaining: 0, x-ratelimit-reset, and
                                           # "API rate limit exceeded for ..." -> RateLimitExceededException
        "secondary_rate_limit": true,      # 403 "You have exceeded a secondary rate limit. ..."
        "retry_after": "1",                # adds a Retry-After header
        "create_then_fail": true,          # do the real work (e.g. really create the PR), then answer
                                           # the error anyway: a lost response, so a retry sees 422
        "drop": true,                      # close the socket without answering (connection reset)
        "delay_s": 0.2                     # delay the answer; without status/rate_limit/drop the real
                                           # answer is delayed instead of replaced
     }],
     "seed": {"next_number": 40,           # optional: first PR number
              "workflows": {"research-refresh-schedule.yml": "disabled_inactivity"},
              "labels": [{"name": "research", "color": "0e8a16", "description": "..."}],
              "pulls": [{"head": "research-refresh/2026-H1", "base": "main", "title": "...",
                         "body": "...", "draft": false, "state": "open", "labels": ["research"]}]}}

Calls are counted per rule: every rule whose method and path match a request counts it, and the
first rule that decides to fire answers. Authentication is checked before rules. Everything is
deterministic: ids come from counters and timestamps are 2026-11-30T00:00:00Z plus one second per
state change.
"""

from __future__ import annotations

import copy
import fnmatch
import hashlib
import json
import os
import re
import subprocess
import threading
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlencode

from research_dispatch_fakes.http import FakeRequest, FakeResponse, FakeServer

DOCS_URL = "https://docs.github.com/rest"
HTML_HOST = "https://github.invalid"
BOT_LOGIN = "research-dispatch[bot]"
BODY_LIMIT = 65_536
RATE_LIMIT = 5000
EPOCH = datetime(2026, 11, 30, tzinfo=timezone.utc)
RATE_RESET = int((EPOCH + timedelta(hours=1)).timestamp())
ZERO_SHA = "0" * 40
DEFAULT_LABEL_COLOR = "ededed"

_HEX_SHA = re.compile(r"^[0-9a-f]{4,40}$")
_LABEL_COLOR = re.compile(r"^[0-9a-fA-F]{6}$")
_MUTATIONS = ("convertPullRequestToDraft", "markPullRequestReadyForReview")
_STATUS_MESSAGES = {
    400: "Bad Request",
    401: "Requires authentication",
    403: "Resource not accessible by integration",
    404: "Not Found",
    409: "Conflict",
    422: "Validation Failed",
    429: "Too Many Requests",
    500: "Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}
_RULE_KEYS = frozenset({
    "method", "path", "on_call", "calls", "every", "times", "status", "message", "errors", "rate_limit",
    "secondary_rate_limit", "retry_after", "create_then_fail", "drop", "delay_s",
})
_SETTING_KEYS = frozenset({"drafts_supported", "token_kind", "issues_write", "collaborators", "actions_read"})
WORKFLOW_STATES = ("active", "deleted", "disabled_fork", "disabled_inactivity", "disabled_manually")
STATE_REASONS = ("completed", "not_planned", "reopened")
WORKFLOWS_DIR = ".github/workflows"
DRAFTS_UNSUPPORTED = "Draft pull requests are not supported in this repository."
NOT_ACCESSIBLE = "Resource not accessible by integration"
NOT_COLLABORATOR = ("Reviews may only be requested from collaborators. One or more of the users or teams you "
                    "specified is not a collaborator of the {repo} repository.")
_SEED_PULL_KEYS = frozenset({"head", "base", "title", "body", "draft", "state", "labels"})


def _iso(seconds: int) -> str:
    """Format the fake clock: fixed epoch plus `seconds`, in GitHub's `Z` form."""
    return (EPOCH + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _fake_sha(*parts: str) -> str:
    """A stable 40-hex id for in-memory objects, so runs are byte-for-byte repeatable."""
    return hashlib.sha1("\x00".join(parts).encode("utf-8")).hexdigest()


def _error_body(message: str, errors: list[Any] | None = None) -> dict[str, Any]:
    """GitHub's error envelope; PyGithub maps exceptions on `message` (and status) only."""
    body: dict[str, Any] = {"message": message, "documentation_url": DOCS_URL}
    if errors is not None:
        body["errors"] = errors
    return body


class _HTTPError(Exception):
    """Raised inside a route to answer with a GitHub-shaped error and abandon the request."""

    def __init__(self, status: int, message: str | None = None, errors: list[Any] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message or _STATUS_MESSAGES.get(status, "Error")
        self.errors = errors if errors is not None else ([] if status == 422 else None)

    def response(self) -> FakeResponse:
        return FakeResponse.json(_error_body(self.message, self.errors), self.status)


def _plain(status: int, message: str) -> _HTTPError:
    """An error whose whole explanation is its `message` (no `errors` list), as GitHub sends some 422s."""
    error = _HTTPError(status, message)
    error.errors = None
    return error


def _invalid(resource: str, field: str, code: str = "invalid", message: str | None = None) -> _HTTPError:
    """A 422 "Validation Failed" with one structured error, the shape GitHub uses for bad fields."""
    error: dict[str, Any] = {"resource": resource, "field": field, "code": code}
    if message is not None:
        error["message"] = message
    return _HTTPError(422, "Validation Failed", [error])


def _custom(resource: str, message: str, field: str | None = None) -> _HTTPError:
    """A 422 whose human text sits in `errors[0].message`, like "A pull request already exists"."""
    error: dict[str, Any] = {"resource": resource, "code": "custom", "message": message}
    if field is not None:
        error["field"] = field
    return _HTTPError(422, "Validation Failed", [error])


def _json_body(request: FakeRequest) -> Any:
    """The parsed body; malformed JSON is the client's fault, so it gets GitHub's 400."""
    try:
        return request.json()
    except (ValueError, UnicodeDecodeError) as exc:
        raise _HTTPError(400, "Problems parsing JSON") from exc


def _json_object(request: FakeRequest) -> dict[str, Any]:
    """A body that must be a JSON object (an empty body counts as `{}`)."""
    data = _json_body(request)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise _HTTPError(400, "Problems parsing JSON")
    return data



# ----------------------------------------------------------------------------------------------
# Scenario rules
# ----------------------------------------------------------------------------------------------
@dataclass
class _Rule:
    """One scripted failure; `seen`/`fired` are the per-rule counters the scenario format promises."""

    index: int
    method: str
    path: str
    on_call: int | None
    calls: frozenset[int] | None
    every: int | None
    times: int | None
    status: int | None
    message: str | None
    errors: list[Any] | None
    rate_limit: bool
    secondary_rate_limit: bool
    retry_after: str | None
    create_then_fail: bool
    drop: bool
    delay_s: float
    seen: int = 0
    fired: int = 0

    @classmethod
    def parse(cls, index: int, raw: Any) -> _Rule:
        """Validate strictly: a typo in a scenario should fail the test, not silently never fire."""
        if not isinstance(raw, dict):
            raise ValueError(f"rule {index}: expected an object, got {raw!r}")
        unknown = set(raw) - _RULE_KEYS
        if unknown:
            raise ValueError(f"rule {index}: unknown keys {sorted(unknown)}")
        calls = raw.get("calls")
        if calls is not None and not (isinstance(calls, list) and all(isinstance(c, int) for c in calls)):
            raise ValueError(f"rule {index}: 'calls' must be a list of integers")
        for key in ("on_call", "every", "times", "status"):
            if raw.get(key) is not None and not isinstance(raw[key], int):
                raise ValueError(f"rule {index}: '{key}' must be an integer")
        if raw.get("every") is not None and raw["every"] < 1:
            raise ValueError(f"rule {index}: 'every' must be >= 1")
        return cls(
            index=index,
            method=str(raw.get("method", "*")).upper(),
            path=str(raw.get("path", "*")),
            on_call=raw.get("on_call"),
            calls=frozenset(calls) if calls is not None else None,
            every=raw.get("every"),
            times=raw.get("times"),
            status=raw.get("status"),
            message=raw.get("message"),
            errors=raw.get("errors"),
            rate_limit=bool(raw.get("rate_limit", False)),
            secondary_rate_limit=bool(raw.get("secondary_rate_limit", False)),
            retry_after=str(raw["retry_after"]) if raw.get("retry_after") is not None else None,
            create_then_fail=bool(raw.get("create_then_fail", False)),
            drop=bool(raw.get("drop", False)),
            delay_s=float(raw.get("delay_s", 0.0)),
        )

    def matches(self, method: str, path: str) -> bool:
        return (self.method in ("*", method)) and fnmatch.fnmatchcase(path, self.path)

    def should_fire(self) -> bool:
        """Called after `seen` was incremented for this request."""
        if self.times is not None and self.fired >= self.times:
            return False
        if self.on_call is not None:
            return self.seen == self.on_call
        if self.calls is not None:
            return self.seen in self.calls
        if self.every is not None:
            return self.seen % self.every == 0
        return True

    @property
    def replaces_answer(self) -> bool:
        """A delay-only rule slows the real answer down instead of replacing it."""
        return (self.status is not None or self.rate_limit or self.secondary_rate_limit or self.drop
                or self.create_then_fail or not self.delay_s)


# ----------------------------------------------------------------------------------------------
# Ref and commit stores
# ----------------------------------------------------------------------------------------------
class _GitStore:
    """Refs and commits read live from a real (bare) repository with the git CLI.

    Reading live rather than caching is the point: the publish stage pushes with real git, and the
    fake must see exactly what arrived in `origin`, not what it was told.
    """

    live = True

    def __init__(self, git_dir: Path) -> None:
        self.git_dir = git_dir
        env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
        env.update({"TZ": "UTC", "LC_ALL": "C", "GIT_TERMINAL_PROMPT": "0"})
        self._env = env

    def _git(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["git", "--git-dir", str(self.git_dir), *args], capture_output=True,
                              text=True, env=self._env, check=False)

    def refs(self) -> dict[str, tuple[str, str]]:
        """All refs as {refname: (sha, object type)}; the repositories here are tiny."""
        out = self._git("for-each-ref", "--format=%(refname)%00%(objectname)%00%(objecttype)", "refs/")
        result: dict[str, tuple[str, str]] = {}
        for line in out.stdout.splitlines():
            name, sha, kind = line.split("\x00")
            result[name] = (sha, kind)
        return result

    def commit(self, rev: str) -> dict[str, Any] | None:
        """Commit metadata for a sha or full refname, or None if it is not a commit here."""
        if not rev or rev.startswith("-"):
            return None
        out = self._git("log", "-1", "--no-color", "--date=format-local:%Y-%m-%dT%H:%M:%SZ",
                        "--format=%H%x00%T%x00%P%x00%an%x00%ae%x00%ad%x00%cn%x00%ce%x00%cd%x00%B",
                        "--end-of-options", rev, "--")
        if out.returncode != 0 or not out.stdout:
            return None
        sha, tree, parents, an, ae, ad, cn, ce, cd, message = out.stdout.split("\x00", 9)
        return {"sha": sha, "tree": tree, "parents": parents.split(),
                "author": {"name": an, "email": ae, "date": ad},
                "committer": {"name": cn, "email": ce, "date": cd},
                "message": message.rstrip("\n")}

    def has_commit(self, sha: str) -> bool:
        return self._git("cat-file", "-e", f"{sha}^{{commit}}").returncode == 0

    def is_ancestor(self, old: str, new: str) -> bool:
        return self._git("merge-base", "--is-ancestor", old, new).returncode == 0

    def ahead(self, base_sha: str, head_sha: str) -> int:
        out = self._git("rev-list", "--count", f"{base_sha}..{head_sha}")
        return int(out.stdout.strip() or 0) if out.returncode == 0 else 0

    def diffstat(self, base_sha: str, head_sha: str) -> tuple[int, int, int]:
        """(additions, deletions, changed_files) of head against the merge base, as GitHub counts."""
        out = self._git("diff", "--numstat", f"{base_sha}...{head_sha}")
        adds = dels = files = 0
        for line in out.stdout.splitlines():
            a, d, _ = line.split("\t", 2)
            files += 1
            adds += int(a) if a.isdigit() else 0
            dels += int(d) if d.isdigit() else 0
        return adds, dels, files

    def set_ref(self, ref: str, sha: str, old: str | None) -> bool:
        """Atomic compare-and-swap; `old=ZERO_SHA` means "must not exist yet"."""
        args = ["update-ref", ref, sha] + ([old] if old else [])
        return self._git(*args).returncode == 0

    def delete_ref(self, ref: str) -> bool:
        return self._git("update-ref", "-d", ref).returncode == 0

    def workflow_files(self, branch: str) -> dict[str, str]:
        """{file name: the workflow's `name:`} of the `.github/workflows` files on `branch`."""
        out = self._git("ls-tree", "--name-only", f"refs/heads/{branch}", f"{WORKFLOWS_DIR}/")
        found: dict[str, str] = {}
        for path in out.stdout.splitlines():
            if not path.endswith((".yml", ".yaml")):
                continue
            text = self._git("show", f"refs/heads/{branch}:{path}").stdout
            match = re.search(r"^name:\s*[\"']?(.+?)[\"']?\s*$", text, re.MULTILINE)
            found[path.rsplit("/", 1)[-1]] = match.group(1) if match else path
        return found


class _MemoryStore:
    """The stand-in when no repository is given: a ref table plus synthetic commits."""

    live = False

    def __init__(self, owner: str, name: str, default_branch: str) -> None:
        self._seed = (owner, name)
        root = _fake_sha("research-dispatch fake root commit", owner, name)
        self._refs: dict[str, str] = {f"refs/heads/{default_branch}": root}
        self._commits: dict[str, dict[str, Any]] = {root: self._synth(root, "Initial commit", [])}

    @staticmethod
    def _synth(sha: str, message: str, parents: list[str]) -> dict[str, Any]:
        person = {"name": "Fake Author", "email": "fake@example.invalid", "date": _iso(0)}
        return {"sha": sha, "tree": _fake_sha("tree", sha), "parents": parents, "author": person,
                "committer": dict(person), "message": message}

    def refs(self) -> dict[str, tuple[str, str]]:
        return {name: (sha, "commit") for name, sha in sorted(self._refs.items())}

    def commit(self, rev: str) -> dict[str, Any] | None:
        sha = self._refs.get(rev, rev)
        if sha in self._commits:
            return copy.deepcopy(self._commits[sha])
        return None

    def has_commit(self, sha: str) -> bool:
        return bool(_HEX_SHA.match(sha)) and len(sha) == 40

    def is_ancestor(self, old: str, new: str) -> bool:
        return True  # no history to check in memory: accept, as documented

    def ahead(self, base_sha: str, head_sha: str) -> int:
        return 0 if base_sha == head_sha else 1

    def diffstat(self, base_sha: str, head_sha: str) -> tuple[int, int, int]:
        return 0, 0, 0

    def set_ref(self, ref: str, sha: str, old: str | None) -> bool:
        current = self._refs.get(ref)
        if old == ZERO_SHA and current is not None:
            return False
        if old not in (None, ZERO_SHA) and current != old:
            return False
        self._refs[ref] = sha
        self._commits.setdefault(sha, self._synth(sha, "Fake commit", []))
        return True

    def delete_ref(self, ref: str) -> bool:
        return self._refs.pop(ref, None) is not None

    def workflow_files(self, branch: str) -> dict[str, str]:
        return {}  # no files in memory: the server's `workflows=` stand in


def _comment_body(request: FakeRequest) -> str:
    """A comment body, validated as GitHub does on create and edit."""
    body = _json_object(request).get("body")
    if not isinstance(body, str) or not body:
        raise _invalid("IssueComment", "body", code="missing_field")
    if len(body) > BODY_LIMIT:
        raise _custom("IssueComment", f"Body is too long (maximum is {BODY_LIMIT} characters)", field="body")
    return body


# ----------------------------------------------------------------------------------------------
# The server
# ----------------------------------------------------------------------------------------------
class FakeGitHub(FakeServer):
    """A fake github.com API root for one repository, driven by the real PyGithub client."""

    # The refs of the request being served (rendering a PR list needs them per item); None between requests.
    _refs_cache: dict[str, tuple[str, str]] | None

    def __init__(self, owner: str = "acme", name: str = "review", default_branch: str = "main",
                 git_dir: Path | None = None, token: str | None = None,
                 scenario: dict[str, Any] | None = None, host: str = "127.0.0.1", port: int = 0, *,
                 drafts_supported: bool = True, token_kind: str = "app", issues_write: bool = True,
                 collaborators: tuple[str, ...] | list[str] = ("mia-maintainer", "octocat"),
                 read_tokens: tuple[str, ...] | list[str] = (), issue_tokens: tuple[str, ...] | list[str] = (),
                 actions_read: bool = True, workflows: dict[str, str] | None = None) -> None:
        super().__init__(host, port)
        self.read_tokens = frozenset(read_tokens)
        self.issue_tokens = frozenset(issue_tokens)
        self._memory_workflows = {name: name.rsplit(".", 1)[0] for name in (workflows or {})}
        self._initial_workflow_states = dict(workflows or {})
        for state in self._initial_workflow_states.values():
            _workflow_state(state)
        self.owner = owner
        self.name = name
        self.default_branch = default_branch
        self.git_dir = Path(git_dir) if git_dir is not None else None
        self.token = token
        self._state_lock = threading.RLock()
        self.drafts_supported = True
        self.token_kind = "app"
        self.issues_write = True
        self.collaborators: tuple[str, ...] = ()
        self.actions_read = True
        self.configure(drafts_supported=drafts_supported, token_kind=token_kind, issues_write=issues_write,
                       collaborators=collaborators, actions_read=actions_read)
        self._rules: list[_Rule] = []
        self.fired: list[dict[str, Any]] = []
        self._reset_state()
        if scenario:
            self.set_scenario(scenario)

    # -- public API -----------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        """What to pass as `Github(base_url=...)`: the bare root, exactly as URLs are built here."""
        return self.root_url

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.name}"

    @property
    def pulls(self) -> list[dict[str, Any]]:
        """Every PR as its full REST JSON, by number (a snapshot; editing it changes nothing)."""
        with self._state_lock:
            self._refs_cache = None
            return [self._pr_json(pr, full=True) for _, pr in sorted(self._pulls.items())]

    @property
    def issues(self) -> list[dict[str, Any]]:
        """Every issue that is not a pull request, as its REST JSON, by number (a snapshot)."""
        with self._state_lock:
            return [self._issue_json(issue) for _, issue in sorted(self._issues.items())]

    def workflow_state(self, file_name: str) -> str:
        with self._state_lock:
            return self._workflow_states.get(file_name, "active")

    def set_workflow_state(self, file_name: str, state: str) -> None:
        """Set a workflow's `state` as GitHub would (`disabled_inactivity` after 60 quiet days, ...)."""
        with self._state_lock:
            self._workflow_states[file_name] = _workflow_state(state)

    def pull(self, number: int) -> dict[str, Any]:
        with self._state_lock:
            self._refs_cache = None
            return self._pr_json(self._pulls[number], full=True)

    @property
    def comments(self) -> dict[int, list[dict[str, Any]]]:
        """Issue comments by PR number, oldest first."""
        with self._state_lock:
            result: dict[int, list[dict[str, Any]]] = {n: [] for n in sorted([*self._pulls, *self._issues])}
            for comment in self._comments.values():
                result.setdefault(comment["number"], []).append(self._comment_json(comment))
            return result

    @property
    def labels(self) -> list[dict[str, Any]]:
        """The repository's labels, in creation order."""
        with self._state_lock:
            return [self._label_json(label) for label in self._labels.values()]

    def state(self) -> dict[str, Any]:
        """Everything a test or the demo may want to assert on, JSON-ready."""
        with self._state_lock:
            self._refs_cache = None
            return {
                "repository": self.full_name,
                "pulls": self.pulls,
                "issues": self.issues,
                "comments": {str(n): c for n, c in self.comments.items()},
                "workflows": dict(sorted(self._workflow_states.items())),
                "labels": self.labels,
                "refs": {name: sha for name, (sha, _) in self._all_refs().items()},
                "fired": copy.deepcopy(self.fired),
            }

    def configure(self, **settings: Any) -> None:
        """What the repository and the token may do (see the module docstring); ValueError if unknown."""
        unknown = set(settings) - _SETTING_KEYS
        if unknown:
            raise ValueError(f"settings: unknown keys {sorted(unknown)}")
        if "token_kind" in settings and settings["token_kind"] not in ("app", "actions"):
            raise ValueError("settings: token_kind is 'app' or 'actions'")
        with self._state_lock:
            if "drafts_supported" in settings:
                self.drafts_supported = bool(settings["drafts_supported"])
            if "token_kind" in settings:
                self.token_kind = str(settings["token_kind"])
            if "issues_write" in settings:
                self.issues_write = bool(settings["issues_write"])
            if "collaborators" in settings:
                self.collaborators = tuple(str(c) for c in settings["collaborators"])
            if "actions_read" in settings:
                self.actions_read = bool(settings["actions_read"])

    def set_scenario(self, scenario: dict[str, Any]) -> None:
        """Replace the rules (counters restart) and apply any `seed`; raises ValueError if malformed."""
        if not isinstance(scenario, dict):
            raise ValueError("scenario must be a JSON object")
        if "settings" in scenario:
            if not isinstance(scenario["settings"], dict):
                raise ValueError("scenario: 'settings' must be an object")
            self.configure(**scenario["settings"])
        unknown = set(scenario) - {"rules", "seed", "settings"}
        if unknown:
            raise ValueError(f"scenario: unknown keys {sorted(unknown)}")
        raw_rules = scenario.get("rules") or []
        if not isinstance(raw_rules, list):
            raise ValueError("scenario: 'rules' must be a list")
        rules = [_Rule.parse(i, raw) for i, raw in enumerate(raw_rules)]
        with self._state_lock:
            self._rules = rules
            self.fired = []
            if scenario.get("seed"):
                self._apply_seed(scenario["seed"])

    def reset(self) -> None:
        """Forget PRs, labels, comments, rules and in-memory refs; a `git_dir` is left untouched."""
        with self._state_lock:
            self._rules = []
            self.fired = []
            self._reset_state()

    def seed_pull(self, head: str, base: str | None = None, title: str = "Seeded pull request",
                  body: str | None = None, draft: bool = False, state: str = "open",
                  labels: list[str] | tuple[str, ...] = ()) -> dict[str, Any]:
        """Insert a PR directly, skipping validation: e.g. a previous cycle's PR that is still open."""
        with self._state_lock:
            self._refs_cache = None
            base = base or self.default_branch
            pr = self._new_pull(head, base, title, body, draft)
            if state == "closed":
                pr["state"] = "closed"
                pr["closed_at"] = pr["updated_at"]
            for label in labels:
                self._attach_label(pr, label)
            return self._pr_json(pr, full=True)

    # -- state --------------------------------------------------------------------------------
    def _reset_state(self) -> None:
        self._clock = 0
        self._next_number = 1
        self._next_id = 1000
        self._request_count = 0
        self._pulls: dict[int, dict[str, Any]] = {}
        self._issues: dict[int, dict[str, Any]] = {}  # issues that are not pull requests, numbered with them
        self._workflow_states: dict[str, str] = dict(self._initial_workflow_states)
        self._labels: dict[str, dict[str, Any]] = {}  # keyed by lower-cased name: GitHub is case-blind
        self._comments: dict[int, dict[str, Any]] = {}
        self._store: _GitStore | _MemoryStore = (
            _GitStore(self.git_dir) if self.git_dir is not None
            else _MemoryStore(self.owner, self.name, self.default_branch))
        self._refs_cache = None

    def _tick(self) -> str:
        self._clock += 1
        return _iso(self._clock)

    def _new_id(self) -> int:
        self._next_id += 1
        return self._next_id

    def _apply_seed(self, seed: Any) -> None:
        if not isinstance(seed, dict):
            raise ValueError("scenario: 'seed' must be an object")
        unknown = set(seed) - {"next_number", "labels", "pulls", "workflows"}
        if unknown:
            raise ValueError(f"scenario seed: unknown keys {sorted(unknown)}")
        if seed.get("next_number") is not None:
            self._next_number = int(seed["next_number"])
        for file_name, state in (seed.get("workflows") or {}).items():
            self._workflow_states[str(file_name)] = _workflow_state(state)
        for raw in seed.get("labels") or []:
            self._create_label(str(raw["name"]), raw.get("color"), raw.get("description"))
        for raw in seed.get("pulls") or []:
            unknown = set(raw) - _SEED_PULL_KEYS
            if unknown:
                raise ValueError(f"scenario seed pull: unknown keys {sorted(unknown)}")
            self.seed_pull(head=str(raw["head"]), base=raw.get("base"),
                           title=str(raw.get("title", "Seeded pull request")), body=raw.get("body"),
                           draft=bool(raw.get("draft", False)), state=str(raw.get("state", "open")),
                           labels=list(raw.get("labels") or []))

    # -- refs -----------------------------------------------------------------------------------
    def _all_refs(self) -> dict[str, tuple[str, str]]:
        """Refs, cached for the duration of one request (rendering a PR list needs them per item)."""
        if self._refs_cache is None:
            self._refs_cache = self._store.refs()
        return self._refs_cache

    def _branch_sha(self, branch: str) -> str | None:
        entry = self._all_refs().get(f"refs/heads/{branch}")
        return entry[0] if entry else None

    # -- HTTP entry point -----------------------------------------------------------------------
    def handle(self, request: FakeRequest) -> FakeResponse:
        segments = [unquote(s) for s in request.path.split("/")[1:]]
        decoded_path = "/" + "/".join(segments)
        if segments and segments[0] == "__fake__":
            return self._control(request, segments[1:])
        with self._state_lock:
            self._refs_cache = None
            self._request_count += 1
            denied = self._auth_error(request)
            if denied is not None:
                return denied
            rule = self._pick_rule(request.method, decoded_path)
            if rule is not None and rule.replaces_answer and not rule.create_then_fail:
                return self._rule_response(rule)
            try:
                response = self._route(request, segments)
            except _HTTPError as exc:
                response = exc.response()
            self._refs_cache = None
            if rule is not None and rule.create_then_fail:
                return self._rule_response(rule)
            response.headers.update(self._rate_headers())
            if rule is not None:
                response.delay_s = rule.delay_s
            return response

    def _auth_error(self, request: FakeRequest) -> FakeResponse | None:
        if self.token is None:
            return None
        header = request.headers.get("authorization", "")
        if not header:
            return FakeResponse.json(_error_body("Requires authentication"), 401)
        scheme, _, value = header.partition(" ")
        if scheme.lower() not in ("token", "bearer"):
            return FakeResponse.json(_error_body("Bad credentials"), 401)
        if value.strip() == self.token:
            return None
        if value.strip() in self.read_tokens | self.issue_tokens:
            if request.method in ("GET", "HEAD") or (value.strip() in self.issue_tokens
                                                     and self._issue_write(request.path)):
                return None
            return FakeResponse.json(_error_body(NOT_ACCESSIBLE), 403)
        return FakeResponse.json(_error_body("Bad credentials"), 401)

    def _issue_write(self, path: str) -> bool:
        """A write an `issues: write` token may make: issues that are not pull requests, and labels."""
        rest = [unquote(s) for s in path.split("?", 1)[0].split("/")[4:]]
        if rest[:1] == ["labels"] or rest == ["issues"]:
            return True
        if rest[:1] == ["issues"] and len(rest) >= 2:
            if rest[1] == "comments":
                comment = self._comments.get(int(rest[2])) if len(rest) > 2 and rest[2].isdigit() else None
                return comment is not None and comment["number"] in self._issues
            return rest[1].isdigit() and int(rest[1]) in self._issues
        return False

    def _pick_rule(self, method: str, path: str) -> _Rule | None:
        chosen: _Rule | None = None
        for rule in self._rules:
            if not rule.matches(method, path):
                continue
            rule.seen += 1
            if chosen is None and rule.should_fire():
                chosen = rule
        if chosen is not None:
            chosen.fired += 1
            self.fired.append({"rule": chosen.index, "method": method, "path": path, "call": chosen.seen})
        return chosen

    def _rate_headers(self, remaining: int | None = None) -> dict[str, str]:
        used = min(self._request_count, RATE_LIMIT)
        left = RATE_LIMIT - used if remaining is None else remaining
        return {
            "X-RateLimit-Limit": str(RATE_LIMIT),
            "X-RateLimit-Remaining": str(left),
            "X-RateLimit-Used": str(RATE_LIMIT - left),
            "X-RateLimit-Reset": str(RATE_RESET),
            "X-RateLimit-Resource": "core",
            "X-GitHub-Request-Id": f"FAKE:{self._request_count:06d}",
            "X-GitHub-Media-Type": "github.v3; format=json",
        }

    def _rule_response(self, rule: _Rule) -> FakeResponse:
        if rule.drop:
            return FakeResponse(reset_connection=True, delay_s=rule.delay_s)
        headers = self._rate_headers()
        if rule.rate_limit:
            status = rule.status or 403
            message = rule.message or ("API rate limit exceeded for installation ID 1. If you reach out to "
                                       "GitHub Support for help, please include the request ID FAKE.")
            headers.update(self._rate_headers(remaining=0))
        elif rule.secondary_rate_limit:
            status = rule.status or 403
            message = rule.message or ("You have exceeded a secondary rate limit. "
                                       "Please wait a few minutes before you try again.")
        else:
            status = rule.status or 500
            message = rule.message or _STATUS_MESSAGES.get(status, "Error")
        if rule.retry_after is not None:
            headers["Retry-After"] = rule.retry_after
        errors = (rule.errors or []) if status == 422 else None
        return FakeResponse.json(_error_body(message, errors), status, headers=headers, delay_s=rule.delay_s)

    def _control(self, request: FakeRequest, rest: list[str]) -> FakeResponse:
        """Test hooks; never authenticated or scripted so a harness can always reach them."""
        action = rest[0] if rest else ""
        if action == "state" and request.method == "GET":
            return FakeResponse.json(self.state())
        if action == "scenario" and request.method == "POST":
            try:
                self.set_scenario(request.json() or {})
            except (ValueError, KeyError, TypeError) as exc:
                return FakeResponse.json(_error_body(f"bad scenario: {exc}"), 400)
            return FakeResponse.json({"ok": True, "rules": len(self._rules)})
        if action == "reset" and request.method == "POST":
            self.reset()
            return FakeResponse.json({"ok": True})
        return FakeResponse.json(_error_body("Not Found"), 404)

    # -- routing --------------------------------------------------------------------------------
    def _route(self, request: FakeRequest, segs: list[str]) -> FakeResponse:
        method = request.method
        if segs == ["user"] and method == "GET":
            return FakeResponse.json(self._bot_json(full=True))
        if len(segs) == 2 and segs[0] == "users" and method == "GET":
            if segs[1] == BOT_LOGIN:
                return FakeResponse.json(self._bot_json(full=True))
            if segs[1].lower() == self.owner.lower():
                return FakeResponse.json(self._owner_json())
            raise _HTTPError(404)
        if segs == ["rate_limit"] and method == "GET":
            return FakeResponse.json(self._rate_limit_json())
        if segs == ["graphql"] and method == "POST":
            return self._graphql(request)
        if len(segs) >= 3 and segs[0] == "repos":
            if segs[1].lower() != self.owner.lower() or segs[2].lower() != self.name.lower():
                raise _HTTPError(404)
            return self._route_repo(request, segs[3:])
        raise _HTTPError(404)

    def _route_repo(self, request: FakeRequest, rest: list[str]) -> FakeResponse:
        method = request.method
        head = rest[0] if rest else ""
        if not rest or rest == [""]:
            if method == "GET":
                return FakeResponse.json(self._repo_json())
            raise _HTTPError(404)
        if head == "branches" and method == "GET":
            if len(rest) == 1:
                names = [n.removeprefix("refs/heads/") for n in self._all_refs()
                         if n.startswith("refs/heads/")]
                return self._paginate(request, [self._branch_json(n, brief=True) for n in sorted(names)])
            return FakeResponse.json(self._branch_json("/".join(rest[1:])))
        if head == "git":
            return self._route_git(request, rest[1:])
        if head == "commits" and len(rest) >= 2 and method == "GET":
            return FakeResponse.json(self._commit_json(self._resolve_commit("/".join(rest[1:]))))
        if head == "pulls":
            return self._route_pulls(request, rest[1:])
        if head == "issues":
            return self._route_issues(request, rest[1:])
        if head == "labels":
            return self._route_labels(request, rest[1:])
        if head == "actions":
            return self._route_actions(request, rest[1:])
        raise _HTTPError(404)

    # -- actions workflows ----------------------------------------------------------------------
    def _workflows(self) -> dict[str, str]:
        """{file name: workflow name} of the default branch (or the `workflows=` given)."""
        return self._store.workflow_files(self.default_branch) if self._store.live else dict(self._memory_workflows)

    def _route_actions(self, request: FakeRequest, rest: list[str]) -> FakeResponse:
        if not self.actions_read:
            raise _HTTPError(403, NOT_ACCESSIBLE)
        if rest[:1] != ["workflows"]:
            raise _HTTPError(404)
        files = self._workflows()
        ids = {self._workflow_id(name): name for name in files}
        if len(rest) == 1 and request.method == "GET":
            items = [self._workflow_json(name, files[name]) for name in sorted(files)]
            return FakeResponse.json({"total_count": len(items), "workflows": items})
        key = rest[1] if len(rest) >= 2 else ""
        name = ids.get(int(key)) if key.isdigit() else (key if key in files else None)
        if name is None:
            raise _HTTPError(404)
        if len(rest) == 2 and request.method == "GET":
            return FakeResponse.json(self._workflow_json(name, files[name]))
        if len(rest) == 3 and request.method == "PUT" and rest[2] in ("enable", "disable"):
            self._workflow_states[name] = "active" if rest[2] == "enable" else "disabled_manually"
            self._tick()
            return FakeResponse(status=204)
        raise _HTTPError(404)

    @staticmethod
    def _workflow_id(file_name: str) -> int:
        return 10_000 + int(hashlib.sha1(file_name.encode("utf-8")).hexdigest()[:6], 16)

    def _workflow_json(self, file_name: str, name: str) -> dict[str, Any]:
        number = self._workflow_id(file_name)
        path = f"{WORKFLOWS_DIR}/{file_name}"
        return {"id": number, "node_id": f"W_kwFAKE{number}", "name": name, "path": path,
                "state": self._workflow_states.get(file_name, "active"), "created_at": _iso(0),
                "updated_at": _iso(self._clock), "url": f"{self._repo_url}/actions/workflows/{number}",
                "html_url": f"{self._html_repo}/blob/{self.default_branch}/{path}",
                "badge_url": f"{self._html_repo}/workflows/{quote(name)}/badge.svg"}

    # -- git data -------------------------------------------------------------------------------
    def _route_git(self, request: FakeRequest, rest: list[str]) -> FakeResponse:
        method = request.method
        kind = rest[0] if rest else ""
        tail = "/".join(rest[1:])
        refs = self._all_refs()
        if kind == "ref" and method == "GET" and tail:
            entry = refs.get(f"refs/{tail}")
            if entry is None:
                raise _HTTPError(404)
            return FakeResponse.json(self._ref_json(f"refs/{tail}", *entry))
        if kind == "matching-refs" and method == "GET":
            prefix = f"refs/{tail}"
            return self._paginate(request, [self._ref_json(n, *e) for n, e in sorted(refs.items())
                                            if n.startswith(prefix)])
        if kind == "refs" and not tail:
            if method == "GET":
                return self._paginate(request, [self._ref_json(n, *e) for n, e in sorted(refs.items())])
            if method == "POST":
                return self._create_ref(request)
            raise _HTTPError(404)
        if kind == "refs":
            name = f"refs/{tail}"
            if method == "GET":
                if name in refs:
                    return FakeResponse.json(self._ref_json(name, *refs[name]))
                matches = [self._ref_json(n, *e) for n, e in sorted(refs.items()) if n.startswith(name)]
                if not matches:
                    raise _HTTPError(404)
                return FakeResponse.json(matches)
            if method == "PATCH":
                return self._update_ref(request, name)
            if method == "DELETE":
                if name not in refs or not self._store.delete_ref(name):
                    raise _HTTPError(422, "Reference does not exist")
                self._tick()
                return FakeResponse(status=204)
            raise _HTTPError(404)
        if kind == "commits" and method == "GET" and tail:
            if not _HEX_SHA.match(tail):
                raise _HTTPError(404)
            info = self._store.commit(tail)
            if info is None:
                raise _HTTPError(404)
            return FakeResponse.json(self._git_commit_json(info))
        raise _HTTPError(404)

    def _create_ref(self, request: FakeRequest) -> FakeResponse:
        data = _json_object(request)
        ref, sha = data.get("ref"), data.get("sha")
        if not isinstance(ref, str) or not ref.startswith("refs/") or ref.count("/") < 2:
            raise _HTTPError(422, "Reference name must start with 'refs/' and have at least two slashes.")
        if not isinstance(sha, str) or not self._store.has_commit(sha):
            raise _HTTPError(422, "Object does not exist")
        if ref in self._all_refs() or not self._store.set_ref(ref, sha, ZERO_SHA):
            raise _HTTPError(422, "Reference already exists")
        self._tick()
        self._refs_cache = None
        sha_now, kind = self._all_refs()[ref]
        return FakeResponse.json(self._ref_json(ref, sha_now, kind), 201,
                                 headers={"Location": self._ref_url(ref)})

    def _update_ref(self, request: FakeRequest, name: str) -> FakeResponse:
        data = _json_object(request)
        sha, force = data.get("sha"), bool(data.get("force", False))
        current = self._all_refs().get(name)
        if current is None:
            raise _HTTPError(422, "Reference does not exist")
        if not isinstance(sha, str) or not self._store.has_commit(sha):
            raise _HTTPError(422, "Object does not exist")
        if not force and not self._store.is_ancestor(current[0], sha):
            raise _HTTPError(422, "Update is not a fast forward")
        if not self._store.set_ref(name, sha, current[0]):
            raise _HTTPError(422, "Reference cannot be updated")
        self._tick()
        self._refs_cache = None
        return FakeResponse.json(self._ref_json(name, *self._all_refs()[name]))

    def _resolve_commit(self, rev: str) -> dict[str, Any]:
        """A sha or branch/tag name to commit info; GitHub's commits API accepts either."""
        refs = self._all_refs()
        for candidate in (f"refs/heads/{rev}", f"refs/tags/{rev}"):
            if candidate in refs:
                info = self._store.commit(refs[candidate][0])
                if info is not None:
                    return info
        info = self._store.commit(rev) if _HEX_SHA.match(rev) else None
        if info is None:
            raise _HTTPError(422, f"No commit found for SHA: {rev}")
        return info

    # -- pulls ----------------------------------------------------------------------------------
    def _route_pulls(self, request: FakeRequest, rest: list[str]) -> FakeResponse:
        method = request.method
        if not rest:
            if method == "GET":
                return self._list_pulls(request)
            if method == "POST":
                return self._create_pull(request)
            raise _HTTPError(404)
        pr = self._get_pull(rest[0])
        if len(rest) == 1:
            if method == "GET":
                return FakeResponse.json(self._pr_json(pr, full=True))
            if method == "PATCH":
                return self._edit_pull(pr, _json_object(request))
        if rest[1:] == ["merge"] and method == "GET":
            raise _HTTPError(404)
        if rest[1:] == ["requested_reviewers"]:
            if method == "GET":
                return FakeResponse.json({"users": [self._user_json(login) for login in pr["reviewers"]],
                                          "teams": []})
            if method == "POST":
                return self._request_reviewers(pr, _json_object(request))
        raise _HTTPError(404)

    def _request_reviewers(self, pr: dict[str, Any], data: dict[str, Any]) -> FakeResponse:
        """GitHub: reviewers must be collaborators (422 otherwise); the author cannot review their PR."""
        users, teams = data.get("reviewers") or [], data.get("team_reviewers") or []
        if not isinstance(users, list) or not isinstance(teams, list) or not all(isinstance(u, str) for u in users):
            raise _invalid("PullRequest", "reviewers")
        if not users and not teams:
            raise _invalid("PullRequest", "reviewers", code="missing_field")
        if teams or any(u.lower() not in {c.lower() for c in self.collaborators} for u in users):
            raise _plain(422, NOT_COLLABORATOR.format(repo=self.full_name))
        if any(u.lower() == BOT_LOGIN.lower() for u in users):
            raise _plain(422, "Review cannot be requested from pull request author.")
        for user in users:
            if user.lower() not in [r.lower() for r in pr["reviewers"]]:
                pr["reviewers"].append(user)
        self._touch(pr)
        return FakeResponse.json(self._pr_json(pr, full=True), 201)

    def _get_pull(self, raw: str) -> dict[str, Any]:
        if not raw.isdigit() or int(raw) not in self._pulls:
            raise _HTTPError(404)
        return self._pulls[int(raw)]

    def _list_pulls(self, request: FakeRequest) -> FakeResponse:
        state = request.param("state", "open")
        if state not in ("open", "closed", "all"):
            raise _invalid("PullRequest", "state")
        head = request.param("head")
        base = request.param("base")
        items = [pr for pr in self._pulls.values() if state == "all" or pr["state"] == state]
        if head and ":" in head:  # GitHub ignores a head filter that lacks the "owner:" part
            owner, _, branch = head.partition(":")
            items = [pr for pr in items if pr["head_ref"] == branch and owner.lower() == self.owner.lower()]
        if base:
            items = [pr for pr in items if pr["base_ref"] == base]
        sort = request.param("sort", "created")
        direction = request.param("direction", "desc" if sort == "created" else "asc")
        key = "updated_clock" if sort in ("updated", "long-running") else "number"
        items.sort(key=lambda pr: (pr[key], pr["number"]), reverse=direction == "desc")
        return self._paginate(request, [self._pr_json(pr, full=False) for pr in items])

    def _parse_head(self, head: str) -> str:
        owner, sep, branch = head.partition(":")
        if not sep:
            return head
        if owner.lower() != self.owner.lower() or not branch:
            raise _invalid("PullRequest", "head")
        return branch

    def _check_body(self, body: Any, resource: str = "PullRequest") -> None:
        if body is not None and not isinstance(body, str):
            raise _invalid(resource, "body")
        if isinstance(body, str) and len(body) > BODY_LIMIT:
            raise _custom(resource, f"body is too long (maximum is {BODY_LIMIT} characters)", field="body")

    def _open_duplicate(self, head_ref: str, base_ref: str, exclude: int | None = None) -> bool:
        return any(pr["state"] == "open" and pr["head_ref"] == head_ref and pr["base_ref"] == base_ref
                   and pr["number"] != exclude for pr in self._pulls.values())

    def _create_pull(self, request: FakeRequest) -> FakeResponse:
        data = _json_object(request)
        for required in ("title", "head", "base"):
            if not isinstance(data.get(required), str) or not data[required]:
                raise _invalid("PullRequest", required, code="missing_field")
        self._check_body(data.get("body"))
        head_ref = self._parse_head(data["head"])
        base_ref = data["base"]
        base_sha = self._branch_sha(base_ref)
        if base_sha is None:
            raise _invalid("PullRequest", "base")
        if self._open_duplicate(head_ref, base_ref):
            raise _custom("PullRequest", f"A pull request already exists for {self.owner}:{head_ref}.")
        head_sha = self._branch_sha(head_ref)
        if self._store.live and (head_sha is None or self._store.ahead(base_sha, head_sha) == 0):
            raise _custom("PullRequest", f"No commits between {base_ref} and {head_ref}")
        if data.get("draft") and not self.drafts_supported:
            raise _plain(422, DRAFTS_UNSUPPORTED)
        pr = self._new_pull(head_ref, base_ref, data["title"], data.get("body"),
                            bool(data.get("draft", False)))
        if "maintainer_can_modify" in data:
            pr["maintainer_can_modify"] = bool(data["maintainer_can_modify"])
        return FakeResponse.json(self._pr_json(pr, full=True), 201, headers={"Location": self._pull_url(pr)})

    def _new_pull(self, head_ref: str, base_ref: str, title: str, body: str | None,
                  draft: bool) -> dict[str, Any]:
        number = self._next_number
        self._next_number += 1
        now = self._tick()
        pr: dict[str, Any] = {
            "number": number, "id": self._new_id(), "issue_id": self._new_id(),
            "title": title, "body": body, "state": "open", "draft": draft,
            "head_ref": head_ref, "base_ref": base_ref,
            "head_sha": self._branch_sha(head_ref) or _fake_sha("head", head_ref),
            "base_sha": self._branch_sha(base_ref) or _fake_sha("base", base_ref),
            "labels": [], "maintainer_can_modify": False, "reviewers": [],
            "created_at": now, "updated_at": now, "updated_clock": self._clock, "closed_at": None,
        }
        self._pulls[number] = pr
        return pr

    def _touch(self, pr: dict[str, Any]) -> None:
        pr["updated_at"] = self._tick()
        pr["updated_clock"] = self._clock

    def _apply_edit(self, pr: dict[str, Any], data: dict[str, Any], resource: str) -> None:
        """Shared by PATCH /pulls/{n} and PATCH /issues/{n}: validate everything, then apply."""
        if "title" in data and (not isinstance(data["title"], str) or not data["title"]):
            raise _invalid(resource, "title", code="missing_field")
        if "body" in data:
            self._check_body(data["body"], resource)
        state = data.get("state")
        if state is not None and state not in ("open", "closed"):
            raise _invalid(resource, "state")
        base = data.get("base")
        if base is not None and (not isinstance(base, str) or self._branch_sha(base) is None):
            raise _invalid(resource, "base")
        new_base = base or pr["base_ref"]
        if state == "open" and pr["state"] == "closed" and self._open_duplicate(pr["head_ref"], new_base,
                                                                                 exclude=pr["number"]):
            raise _custom(resource, f"A pull request already exists for {self.owner}:{pr['head_ref']}.")
        if "title" in data:
            pr["title"] = data["title"]
        if "body" in data:
            pr["body"] = data["body"]
        if base is not None:
            pr["base_ref"] = base
        if "maintainer_can_modify" in data:
            pr["maintainer_can_modify"] = bool(data["maintainer_can_modify"])
        self._touch(pr)
        if state is not None and state != pr["state"]:
            pr["state"] = state
            pr["closed_at"] = pr["updated_at"] if state == "closed" else None
            if state == "closed":
                pr["head_sha"] = self._branch_sha(pr["head_ref"]) or pr["head_sha"]

    def _edit_pull(self, pr: dict[str, Any], data: dict[str, Any]) -> FakeResponse:
        self._apply_edit(pr, {k: v for k, v in data.items() if k != "draft"}, "PullRequest")
        return FakeResponse.json(self._pr_json(pr, full=True))

    # -- issues, labels, comments ---------------------------------------------------------------
    def _route_issues(self, request: FakeRequest, rest: list[str]) -> FakeResponse:
        method = request.method
        if rest[:1] == ["comments"] and len(rest) == 2:
            return self._route_comment(request, rest[1])
        if not rest:
            if method == "GET":
                return self._list_issues(request)
            if method == "POST":
                return self._create_issue(request)
            raise _HTTPError(404)
        if rest[0].isdigit() and int(rest[0]) in self._issues:
            return self._route_plain_issue(request, self._issues[int(rest[0])], rest[1:])
        pr = self._get_pull(rest[0])
        sub = rest[1] if len(rest) > 1 else None
        if sub is None:
            if method == "GET":
                return FakeResponse.json(self._issue_json(pr))
            if method == "PATCH":
                data = _json_object(request)
                labels = data.pop("labels", None)
                self._apply_edit(pr, data, "Issue")
                if labels is not None:
                    pr["labels"] = []
                    self._add_labels(pr, labels)
                return FakeResponse.json(self._issue_json(pr))
            raise _HTTPError(404)
        if sub == "labels":
            return self._route_issue_labels(request, pr, rest[2:])
        if sub == "comments" and len(rest) == 2:
            return self._route_issue_comments(request, pr)
        raise _HTTPError(404)

    def _list_issues(self, request: FakeRequest) -> FakeResponse:
        """GitHub's issue list: issues and pull requests alike (a pull request carries `pull_request`)."""
        state = request.param("state", "open")
        if state not in ("open", "closed", "all"):
            raise _invalid("Issue", "state")
        wanted = [name.strip().lower() for name in (request.param("labels") or "").split(",") if name.strip()]
        items = [(item, False) for item in self._issues.values()] + [(pr, True) for pr in self._pulls.values()]
        items = [(item, is_pr) for item, is_pr in items if (state == "all" or item["state"] == state)
                 and all(name in [n.lower() for n in item["labels"]] for name in wanted)]
        sort = request.param("sort", "created")
        if sort not in ("created", "updated", "comments"):
            raise _invalid("Issue", "sort")
        direction = request.param("direction", "desc")
        key = "updated_clock" if sort == "updated" else "number"
        items.sort(key=lambda pair: (pair[0][key], pair[0]["number"]), reverse=direction == "desc")
        return self._paginate(request, [self._issue_json(item, as_pull=is_pr) for item, is_pr in items])

    def _create_issue(self, request: FakeRequest) -> FakeResponse:
        if not self.issues_write:
            raise _HTTPError(403, NOT_ACCESSIBLE)
        data = _json_object(request)
        title = data.get("title")
        if not isinstance(title, str | int) or not str(title).strip():
            raise _invalid("Issue", "title", code="missing_field")
        self._check_body(data.get("body"), "Issue")
        names = self._label_names_from(data["labels"]) if data.get("labels") is not None else []
        number = self._next_number
        self._next_number += 1
        now = self._tick()
        issue: dict[str, Any] = {"number": number, "issue_id": self._new_id(), "title": str(title),
                                 "body": data.get("body"), "state": "open", "state_reason": None, "labels": [],
                                 "created_at": now, "updated_at": now, "updated_clock": self._clock,
                                 "closed_at": None}
        self._issues[number] = issue
        for name in names:
            self._attach_label(issue, name)
        return FakeResponse.json(self._issue_json(issue), 201, headers={"Location": self._issue_url(issue)})

    def _route_plain_issue(self, request: FakeRequest, issue: dict[str, Any], rest: list[str]) -> FakeResponse:
        method = request.method
        if not rest:
            if method == "GET":
                return FakeResponse.json(self._issue_json(issue))
            if method == "PATCH":
                self._edit_issue(issue, _json_object(request))
                return FakeResponse.json(self._issue_json(issue))
            raise _HTTPError(404)
        if rest[0] == "labels":
            return self._route_issue_labels(request, issue, rest[1:])
        if rest == ["comments"]:
            return self._route_issue_comments(request, issue)
        raise _HTTPError(404)

    def _edit_issue(self, issue: dict[str, Any], data: dict[str, Any]) -> None:
        """PATCH /issues/{n} of an issue: validate everything, then apply (GitHub changes nothing on a 422)."""
        if "title" in data and (not isinstance(data["title"], str) or not data["title"].strip()):
            raise _invalid("Issue", "title", code="missing_field")
        if "body" in data:
            self._check_body(data["body"], "Issue")
        state = data.get("state")
        if state is not None and state not in ("open", "closed"):
            raise _invalid("Issue", "state")
        reason = data.get("state_reason")
        if reason is not None and reason not in STATE_REASONS:
            raise _invalid("Issue", "state_reason")
        names = self._label_names_from(data["labels"]) if data.get("labels") is not None else None
        for key in ("title", "body"):
            if key in data:
                issue[key] = data[key]
        if names is not None:
            issue["labels"] = []
            self._add_labels(issue, names)
        self._touch(issue)
        if state is not None and state != issue["state"]:
            issue["state"] = state
            issue["closed_at"] = issue["updated_at"] if state == "closed" else None
            issue["state_reason"] = (reason or "completed") if state == "closed" else "reopened"
        elif reason is not None:
            issue["state_reason"] = reason

    def _route_issue_comments(self, request: FakeRequest, item: dict[str, Any]) -> FakeResponse:
        if request.method == "GET":
            return self._paginate(request, [self._comment_json(c) for c in self._comments.values()
                                            if c["number"] == item["number"]])
        if request.method == "POST":
            body = _comment_body(request)
            now = self._tick()
            comment = {"id": self._new_id(), "number": item["number"], "body": body, "created_at": now,
                       "updated_at": now}
            self._comments[comment["id"]] = comment
            return FakeResponse.json(self._comment_json(comment), 201, headers={"Location": self._comment_url(comment)})
        raise _HTTPError(404)

    def _route_comment(self, request: FakeRequest, raw_id: str) -> FakeResponse:
        if not raw_id.isdigit() or int(raw_id) not in self._comments:
            raise _HTTPError(404)
        comment = self._comments[int(raw_id)]
        if request.method == "GET":
            return FakeResponse.json(self._comment_json(comment))
        if request.method == "PATCH":
            comment["body"] = _comment_body(request)
            comment["updated_at"] = self._tick()
            return FakeResponse.json(self._comment_json(comment))
        if request.method == "DELETE":
            del self._comments[comment["id"]]
            self._tick()
            return FakeResponse(status=204)
        raise _HTTPError(404)

    def _route_issue_labels(self, request: FakeRequest, pr: dict[str, Any], rest: list[str]) -> FakeResponse:
        method = request.method
        if not rest:
            if method == "GET":
                return self._paginate(request, self._pr_labels(pr))
            if method in ("POST", "PUT"):
                names = self._label_names_from(_json_body(request))
                if method == "PUT":
                    pr["labels"] = []
                self._add_labels(pr, names)
                self._touch(pr)
                return FakeResponse.json(self._pr_labels(pr))
            if method == "DELETE":
                pr["labels"] = []
                self._touch(pr)
                return FakeResponse(status=204)
            raise _HTTPError(404)
        if len(rest) == 1 and method == "DELETE":
            wanted = rest[0].lower()
            if wanted not in [name.lower() for name in pr["labels"]]:
                raise _HTTPError(404, "Label does not exist")
            pr["labels"] = [name for name in pr["labels"] if name.lower() != wanted]
            self._touch(pr)
            return FakeResponse.json(self._pr_labels(pr))
        raise _HTTPError(404)

    @staticmethod
    def _label_names_from(data: Any) -> list[str]:
        """GitHub accepts a bare array, {"labels": [...]}, and strings or {"name": ...} items."""
        if isinstance(data, dict):
            data = data.get("labels")
        if not isinstance(data, list):
            raise _invalid("Label", "labels")
        names: list[str] = []
        for item in data:
            name = item.get("name") if isinstance(item, dict) else item
            if not isinstance(name, str) or not name.strip():
                raise _invalid("Label", "name")
            names.append(name)
        return names

    def _add_labels(self, pr: dict[str, Any], names: list[str]) -> None:
        if not self.issues_write and any(name.lower() not in self._labels for name in names):
            raise _HTTPError(403, NOT_ACCESSIBLE)  # adding an unknown label creates it: needs issues: write
        for name in names:
            self._attach_label(pr, name)

    def _attach_label(self, pr: dict[str, Any], name: str) -> None:
        label = self._labels.get(name.lower()) or self._create_label(name, None, None)
        if label["name"].lower() not in [n.lower() for n in pr["labels"]]:
            pr["labels"].append(label["name"])

    def _pr_labels(self, pr: dict[str, Any]) -> list[dict[str, Any]]:
        return [self._label_json(self._labels[name.lower()]) for name in pr["labels"]
                if name.lower() in self._labels]

    def _create_label(self, name: str, color: str | None, description: str | None) -> dict[str, Any]:
        color = str(color or DEFAULT_LABEL_COLOR).removeprefix("#")
        if not _LABEL_COLOR.match(color):
            raise _invalid("Label", "color")
        if len(name) > 50:
            raise _invalid("Label", "name")
        label = {"id": self._new_id(), "name": name, "color": color.lower(), "description": description}
        self._labels[name.lower()] = label
        self._tick()
        return label

    def _route_labels(self, request: FakeRequest, rest: list[str]) -> FakeResponse:
        method = request.method
        if not rest:
            if method == "GET":
                return self._paginate(request, self.labels)
            if method == "POST":
                data = _json_object(request)
                name = data.get("name")
                if not isinstance(name, str) or not name.strip():
                    raise _invalid("Label", "name", code="missing_field")
                if not self.issues_write:
                    raise _HTTPError(403, NOT_ACCESSIBLE)
                if name.lower() in self._labels:
                    raise _invalid("Label", "name", code="already_exists")
                label = self._create_label(name, data.get("color"), data.get("description"))
                return FakeResponse.json(self._label_json(label), 201,
                                         headers={"Location": self._label_url(label["name"])})
            raise _HTTPError(404)
        key = "/".join(rest).lower()
        found = self._labels.get(key)
        if found is None:
            raise _HTTPError(404)
        label = found
        if method == "GET":
            return FakeResponse.json(self._label_json(label))
        if method == "PATCH":
            data = _json_object(request)
            new_name = data.get("new_name") or data.get("name") or label["name"]
            if not isinstance(new_name, str):
                raise _invalid("Label", "name")
            if new_name.lower() != key and new_name.lower() in self._labels:
                raise _invalid("Label", "name", code="already_exists")
            color = str(data.get("color") or label["color"]).removeprefix("#")
            if not _LABEL_COLOR.match(color):
                raise _invalid("Label", "color")
            for pr in self._pulls.values():
                pr["labels"] = [new_name if n.lower() == key else n for n in pr["labels"]]
            del self._labels[key]
            label.update(name=new_name, color=color.lower(),
                         description=data.get("description", label["description"]))
            self._labels[new_name.lower()] = label
            self._tick()
            return FakeResponse.json(self._label_json(label))
        if method == "DELETE":
            del self._labels[key]
            for pr in self._pulls.values():
                pr["labels"] = [n for n in pr["labels"] if n.lower() != key]
            self._tick()
            return FakeResponse(status=204)
        raise _HTTPError(404)

    # -- GraphQL --------------------------------------------------------------------------------
    def _graphql(self, request: FakeRequest) -> FakeResponse:
        """Just the two draft mutations PyGithub sends; GraphQL errors travel in an HTTP 200."""
        data = _json_object(request)
        query = str(data.get("query", ""))
        variables = data.get("variables") or {}
        match = re.search(r"\b(" + "|".join(_MUTATIONS) + r")\s*\(", query)
        if match is None:
            return FakeResponse.json({"errors": [{
                "message": "The fake GitHub supports only the convertPullRequestToDraft and "
                           "markPullRequestReadyForReview mutations",
                "extensions": {"code": "undefinedField"}}]})
        name = match.group(1)
        mutation_input = variables.get("input") or {}
        node_id = mutation_input.get("pullRequestId")
        pr = next((p for p in self._pulls.values() if self._pr_node_id(p) == node_id), None)
        if pr is None:
            return FakeResponse.json({"data": {name: None}, "errors": [{
                "type": "NOT_FOUND", "path": [name], "locations": [{"line": 1, "column": 1}],
                "message": f"Could not resolve to a node with the global id of '{node_id}'."}]})
        if self.token_kind == "actions":  # the Actions GITHUB_TOKEN may not run these mutations
            return FakeResponse.json({"data": {name: None}, "errors": [{
                "type": "FORBIDDEN", "path": [name], "extensions": {"saml_failure": False},
                "locations": [{"line": 1, "column": 1}], "message": NOT_ACCESSIBLE}]})
        if pr["state"] != "open":
            return FakeResponse.json({"data": {name: None}, "errors": [{
                "type": "UNPROCESSABLE", "path": [name], "locations": [{"line": 1, "column": 1}],
                "message": "Pull request is closed"}]})
        if name == "convertPullRequestToDraft" and not self.drafts_supported:
            return FakeResponse.json({"data": {name: None}, "errors": [{
                "type": "UNPROCESSABLE", "path": [name], "locations": [{"line": 1, "column": 1}],
                "message": DRAFTS_UNSUPPORTED}]})
        want_draft = name == "convertPullRequestToDraft"
        if pr["draft"] != want_draft:
            pr["draft"] = want_draft
            self._touch(pr)
        return FakeResponse.json({"data": {name: {
            "clientMutationId": mutation_input.get("clientMutationId"),
            "pullRequest": {"isDraft": pr["draft"], "id": node_id, "number": pr["number"]}}}})

    # -- pagination -----------------------------------------------------------------------------
    def _paginate(self, request: FakeRequest, items: list[Any]) -> FakeResponse:
        """Slice by page/per_page and emit a GitHub `Link` header (PyGithub's totalCount reads it)."""
        try:
            per_page = min(max(int(request.param("per_page", "30") or 30), 1), 100)
            page = max(int(request.param("page", "1") or 1), 1)
        except ValueError as exc:
            raise _HTTPError(400, "Invalid pagination parameter") from exc
        last = max(1, -(-len(items) // per_page))
        chunk = items[(page - 1) * per_page: page * per_page]

        def page_url(number: int) -> str:
            params = {k: v[0] for k, v in request.query.items()}
            params["page"] = str(number)
            return f"{self.base_url}{request.path}?{urlencode(params)}"

        links: list[str] = []
        if page < last:
            links += [f'<{page_url(page + 1)}>; rel="next"', f'<{page_url(last)}>; rel="last"']
        if page > 1:
            links += [f'<{page_url(page - 1)}>; rel="prev"', f'<{page_url(1)}>; rel="first"']
        headers = {"Link": ", ".join(links)} if links else {}
        return FakeResponse.json(chunk, headers=headers)

    # -- JSON shapes ----------------------------------------------------------------------------
    @property
    def _repo_url(self) -> str:
        return f"{self.base_url}/repos/{self.owner}/{self.name}"

    @property
    def _html_repo(self) -> str:
        return f"{HTML_HOST}/{self.owner}/{self.name}"

    def _pull_url(self, pr: dict[str, Any]) -> str:
        return f"{self._repo_url}/pulls/{pr['number']}"

    def _issue_url(self, pr: dict[str, Any]) -> str:
        return f"{self._repo_url}/issues/{pr['number']}"

    def _comment_url(self, comment: dict[str, Any]) -> str:
        return f"{self._repo_url}/issues/comments/{comment['id']}"

    def _label_url(self, name: str) -> str:
        return f"{self._repo_url}/labels/{quote(name, safe='')}"

    def _ref_url(self, ref: str) -> str:
        return f"{self._repo_url}/git/{quote(ref, safe='/')}"

    @staticmethod
    def _pr_node_id(pr: dict[str, Any]) -> str:
        return f"PR_kwFAKE{pr['id']}"

    def _owner_json(self) -> dict[str, Any]:
        return {"login": self.owner, "id": 2, "node_id": "O_kgFAKE2", "type": "Organization",
                "site_admin": False, "url": f"{self.base_url}/users/{quote(self.owner)}",
                "html_url": f"{HTML_HOST}/{self.owner}", "avatar_url": f"{HTML_HOST}/avatars/{self.owner}"}

    def _user_json(self, login: str) -> dict[str, Any]:
        return {"login": login, "id": 100 + sum(map(ord, login)), "node_id": f"U_kgFAKE{login}", "type": "User",
                "site_admin": False, "url": f"{self.base_url}/users/{quote(login, safe='')}",
                "html_url": f"{HTML_HOST}/{login}", "avatar_url": f"{HTML_HOST}/avatars/{login}"}

    def _bot_json(self, full: bool = False) -> dict[str, Any]:
        bot: dict[str, Any] = {
            "login": BOT_LOGIN, "id": 3, "node_id": "BOT_kgFAKE3", "type": "Bot", "site_admin": False,
            "url": f"{self.base_url}/users/{quote(BOT_LOGIN, safe='')}",
            "html_url": f"{HTML_HOST}/apps/research-dispatch", "avatar_url": f"{HTML_HOST}/avatars/bot"}
        if full:
            bot.update({"name": None, "company": None, "blog": "", "location": None, "email": None,
                        "bio": None, "public_repos": 0, "followers": 0, "following": 0,
                        "created_at": _iso(0), "updated_at": _iso(0)})
        return bot

    def _repo_json(self) -> dict[str, Any]:
        api, html = self._repo_url, self._html_repo
        return {
            "id": 1, "node_id": "R_kgFAKE1", "name": self.name, "full_name": self.full_name,
            "private": False, "visibility": "public", "owner": self._owner_json(), "html_url": html,
            "description": "Repository served by research-dispatch's offline GitHub fake.",
            "fork": False, "url": api, "archived": False, "disabled": False,
            "pulls_url": f"{api}/pulls{{/number}}", "issues_url": f"{api}/issues{{/number}}",
            "labels_url": f"{api}/labels{{/name}}", "branches_url": f"{api}/branches{{/branch}}",
            "git_refs_url": f"{api}/git/refs{{/sha}}", "commits_url": f"{api}/commits{{/sha}}",
            "clone_url": f"{html}.git", "ssh_url": f"git@github.invalid:{self.full_name}.git",
            "default_branch": self.default_branch, "has_issues": True, "has_wiki": False,
            "open_issues_count": sum(1 for pr in self._pulls.values() if pr["state"] == "open"),
            "permissions": {"admin": False, "maintain": False, "push": True, "triage": True, "pull": True},
            "allow_squash_merge": True, "allow_merge_commit": True, "allow_rebase_merge": True,
            "allow_auto_merge": False, "delete_branch_on_merge": False,
            "created_at": _iso(0), "updated_at": _iso(0), "pushed_at": _iso(self._clock),
        }

    def _ref_json(self, name: str, sha: str, kind: str) -> dict[str, Any]:
        object_path = "tags" if kind == "tag" else "commits"
        return {"ref": name, "node_id": f"REF_kwFAKE{_fake_sha(name)[:12]}", "url": self._ref_url(name),
                "object": {"sha": sha, "type": kind, "url": f"{self._repo_url}/git/{object_path}/{sha}"}}

    def _git_commit_json(self, info: dict[str, Any]) -> dict[str, Any]:
        sha = info["sha"]
        return {
            "sha": sha, "node_id": f"C_kwFAKE{sha[:12]}", "url": f"{self._repo_url}/git/commits/{sha}",
            "html_url": f"{self._html_repo}/commit/{sha}", "author": info["author"],
            "committer": info["committer"], "message": info["message"],
            "tree": {"sha": info["tree"], "url": f"{self._repo_url}/git/trees/{info['tree']}"},
            "parents": [{"sha": p, "url": f"{self._repo_url}/git/commits/{p}",
                         "html_url": f"{self._html_repo}/commit/{p}"} for p in info["parents"]],
            "verification": {"verified": False, "reason": "unsigned", "signature": None, "payload": None,
                             "verified_at": None},
        }

    def _commit_json(self, info: dict[str, Any]) -> dict[str, Any]:
        sha = info["sha"]
        git_commit = self._git_commit_json(info)
        return {
            "sha": sha, "node_id": git_commit["node_id"], "url": f"{self._repo_url}/commits/{sha}",
            "html_url": f"{self._html_repo}/commit/{sha}",
            "comments_url": f"{self._repo_url}/commits/{sha}/comments",
            "commit": {"url": git_commit["url"], "author": info["author"], "committer": info["committer"],
                       "message": info["message"], "tree": git_commit["tree"], "comment_count": 0,
                       "verification": git_commit["verification"]},
            "author": None, "committer": None,
            "parents": [{"sha": p, "url": f"{self._repo_url}/commits/{p}",
                         "html_url": f"{self._html_repo}/commit/{p}"} for p in info["parents"]],
        }

    def _branch_json(self, name: str, brief: bool = False) -> dict[str, Any]:
        sha = self._branch_sha(name)
        if sha is None:
            raise _HTTPError(404, "Branch not found")
        url = f"{self._repo_url}/branches/{quote(name, safe='/')}"
        if brief:
            return {"name": name, "commit": {"sha": sha, "url": f"{self._repo_url}/commits/{sha}"},
                    "protected": False}
        info = self._store.commit(sha)
        if info is None:
            raise _HTTPError(404, "Branch not found")
        return {"name": name, "commit": self._commit_json(info),
                "_links": {"self": url, "html": f"{self._html_repo}/tree/{name}"},
                "protected": False,
                "protection": {"enabled": False, "required_status_checks": {
                    "enforcement_level": "off", "contexts": [], "checks": []}},
                "protection_url": f"{url}/protection"}

    def _label_json(self, label: dict[str, Any]) -> dict[str, Any]:
        return {"id": label["id"], "node_id": f"LA_kwFAKE{label['id']}",
                "url": self._label_url(label["name"]), "name": label["name"], "color": label["color"],
                "default": False, "description": label["description"]}

    def _comment_json(self, comment: dict[str, Any]) -> dict[str, Any]:
        number = comment["number"]
        kind = "issues" if number in self._issues else "pull"
        return {"id": comment["id"], "node_id": f"IC_kwFAKE{comment['id']}",
                "url": self._comment_url(comment),
                "html_url": f"{self._html_repo}/{kind}/{number}#issuecomment-{comment['id']}",
                "issue_url": f"{self._repo_url}/issues/{number}", "body": comment["body"], "user": self._bot_json(),
                "created_at": comment["created_at"], "updated_at": comment["updated_at"],
                "author_association": "NONE", "performed_via_github_app": None}

    def _pr_part(self, ref: str, sha: str) -> dict[str, Any]:
        return {"label": f"{self.owner}:{ref}", "ref": ref, "sha": sha, "user": self._owner_json(),
                "repo": self._repo_json()}

    def _pr_json(self, pr: dict[str, Any], full: bool) -> dict[str, Any]:
        """The REST shape; `full=False` is the list-endpoint variant, which omits the costly fields."""
        url, issue_url = self._pull_url(pr), self._issue_url(pr)
        html = f"{self._html_repo}/pull/{pr['number']}"
        head_sha = (self._branch_sha(pr["head_ref"]) if pr["state"] == "open" else None) or pr["head_sha"]
        base_sha = self._branch_sha(pr["base_ref"]) or pr["base_sha"]
        data: dict[str, Any] = {
            "url": url, "id": pr["id"], "node_id": self._pr_node_id(pr), "html_url": html,
            "diff_url": f"{html}.diff", "patch_url": f"{html}.patch", "issue_url": issue_url,
            "commits_url": f"{url}/commits", "review_comments_url": f"{url}/comments",
            "review_comment_url": f"{self._repo_url}/pulls/comments{{/number}}",
            "comments_url": f"{issue_url}/comments",
            "statuses_url": f"{self._repo_url}/statuses/{head_sha}",
            "number": pr["number"], "state": pr["state"], "locked": False, "title": pr["title"],
            "user": self._bot_json(), "body": pr["body"], "labels": self._pr_labels(pr), "milestone": None,
            "active_lock_reason": None, "created_at": pr["created_at"], "updated_at": pr["updated_at"],
            "closed_at": pr["closed_at"], "merged_at": None, "merge_commit_sha": None,
            "assignee": None, "assignees": [],
            "requested_reviewers": [self._user_json(login) for login in pr.get("reviewers", [])],
            "requested_teams": [],
            "head": self._pr_part(pr["head_ref"], head_sha), "base": self._pr_part(pr["base_ref"], base_sha),
            "_links": {"self": {"href": url}, "html": {"href": html}, "issue": {"href": issue_url},
                       "comments": {"href": f"{issue_url}/comments"},
                       "review_comments": {"href": f"{url}/comments"},
                       "commits": {"href": f"{url}/commits"},
                       "statuses": {"href": f"{self._repo_url}/statuses/{head_sha}"}},
            "author_association": "NONE", "auto_merge": None, "draft": pr["draft"],
        }
        if full:
            additions, deletions, changed = self._store.diffstat(base_sha, head_sha) if self._store.live \
                else (0, 0, 0)
            data.update({
                "merged": False, "mergeable": True, "rebaseable": True,
                "mergeable_state": "draft" if pr["draft"] else "clean", "merged_by": None,
                "comments": sum(1 for c in self._comments.values() if c["number"] == pr["number"]),
                "review_comments": 0, "maintainer_can_modify": pr["maintainer_can_modify"],
                "commits": self._store.ahead(base_sha, head_sha) if self._store.live else 1,
                "additions": additions, "deletions": deletions, "changed_files": changed,
            })
        return data

    def _issue_json(self, item: dict[str, Any], as_pull: bool | None = None) -> dict[str, Any]:
        """The issue shape of an issue, or of a pull request (then with `pull_request` and `draft`)."""
        is_pull = item["number"] in self._pulls if as_pull is None else as_pull
        issue_url = self._issue_url(item)
        html = f"{self._html_repo}/{'pull' if is_pull else 'issues'}/{item['number']}"
        data: dict[str, Any] = {
            "url": issue_url, "repository_url": self._repo_url,
            "labels_url": f"{issue_url}/labels{{/name}}", "comments_url": f"{issue_url}/comments",
            "events_url": f"{issue_url}/events", "html_url": html, "id": item["issue_id"],
            "node_id": f"I_kwFAKE{item['issue_id']}", "number": item["number"], "title": item["title"],
            "user": self._bot_json(), "labels": self._pr_labels(item), "state": item["state"],
            "state_reason": item.get("state_reason", "completed" if item["state"] == "closed" else None),
            "locked": False, "assignee": None, "assignees": [], "milestone": None,
            "comments": sum(1 for c in self._comments.values() if c["number"] == item["number"]),
            "created_at": item["created_at"], "updated_at": item["updated_at"], "closed_at": item["closed_at"],
            "author_association": "NONE", "active_lock_reason": None, "body": item["body"], "closed_by": None,
        }
        if is_pull:
            data["draft"] = item["draft"]
            data["pull_request"] = {"url": self._pull_url(item), "html_url": html, "diff_url": f"{html}.diff",
                                    "patch_url": f"{html}.patch", "merged_at": None}
        return data

    def _rate_limit_json(self) -> dict[str, Any]:
        used = min(self._request_count, RATE_LIMIT)

        def rate(limit: int, spent: int) -> dict[str, int]:
            return {"limit": limit, "used": spent, "remaining": limit - spent, "reset": RATE_RESET}

        core = rate(RATE_LIMIT, used)
        return {"resources": {"core": core, "search": rate(30, 0), "graphql": rate(RATE_LIMIT, 0),
                              "integration_manifest": rate(5000, 0), "code_search": rate(10, 0)},
                "rate": core}


def _workflow_state(state: Any) -> str:
    if state not in WORKFLOW_STATES:
        raise ValueError(f"workflow state {state!r} is not one of GitHub's: {', '.join(WORKFLOW_STATES)}")
    return str(state)


__all__ = ["BODY_LIMIT", "BOT_LOGIN", "WORKFLOW_STATES", "FakeGitHub"]


def _main() -> None:  # pragma: no cover - manual poking: `python -m research_dispatch_fakes.github`
    with FakeGitHub() as fake:
        print(json.dumps({"github": fake.base_url}), flush=True)
        threading.Event().wait()


if __name__ == "__main__":  # pragma: no cover
    _main()
