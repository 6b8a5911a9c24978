"""The fake GitHub, driven by the real PyGithub 2.10 client exactly as the publish stage drives it.

Why these tests: the publish stage's own tests will trust this fake, so it must fail where GitHub
fails (duplicate PRs, over-long bodies, non-fast-forward ref updates, bad tokens, rate limits) and
must see what real git pushed into a bare `origin`. No mocks of PyGithub anywhere.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from github import (
    Auth,
    BadCredentialsException,
    Github,
    GithubException,
    RateLimitExceededException,
    UnknownObjectException,
)

from research_dispatch_fakes.github import FakeGitHub

BRANCH = "research-refresh/2026-H2"
TOKEN = "ghs_fake_token"


def client(fake: FakeGitHub, token: str = TOKEN, per_page: int = 30) -> Github:
    """The product's construction, with PyGithub's sleeps and retries off so failures surface at once."""
    return Github(base_url=fake.base_url, auth=Auth.Token(token), timeout=10, retry=None,
                  seconds_between_requests=None, seconds_between_writes=None, per_page=per_page)


def _git_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update({"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1",
                "GIT_AUTHOR_NAME": "Test Author", "GIT_AUTHOR_EMAIL": "author@example.invalid",
                "GIT_AUTHOR_DATE": "2026-11-30T00:00:00Z", "GIT_COMMITTER_NAME": "Test Committer",
                "GIT_COMMITTER_EMAIL": "committer@example.invalid",
                "GIT_COMMITTER_DATE": "2026-11-30T00:00:00Z"})
    return env


def git(cwd: Path, *args: str) -> str:
    out = subprocess.run(["git", *args], cwd=cwd, env=_git_env(), capture_output=True, text=True, check=True)
    return out.stdout.strip()


class Origin:
    """A bare `origin` plus a working clone, the way the publish stage sees them."""

    def __init__(self, root: Path) -> None:
        self.bare = root / "origin.git"
        self.work = root / "work"
        git(root, "init", "-q", "--bare", "-b", "main", str(self.bare))
        git(root, "init", "-q", "-b", "main", str(self.work))
        git(self.work, "remote", "add", "origin", str(self.bare))
        self.commit("README.md", "# review\n", "Initial commit")
        git(self.work, "push", "-q", "origin", "main")
        git(self.work, "checkout", "-q", "-b", BRANCH)
        self.commit("reports/a.md", "report a\n", "Add report a\n\nResearch-Leg: a")
        git(self.work, "push", "-q", "origin", BRANCH)

    def commit(self, path: str, text: str, message: str) -> str:
        target = self.work / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        git(self.work, "add", path)
        git(self.work, "commit", "-q", "-m", message)
        return git(self.work, "rev-parse", "HEAD")

    def sha(self, ref: str) -> str:
        return git(self.bare, "rev-parse", ref)


@pytest.fixture
def origin(tmp_path: Path) -> Origin:
    return Origin(tmp_path)


@pytest.fixture
def fake(origin: Origin) -> Iterator[FakeGitHub]:
    with FakeGitHub(git_dir=origin.bare, token=TOKEN) as server:
        yield server


@pytest.fixture
def memfake() -> Iterator[FakeGitHub]:
    with FakeGitHub(token=TOKEN) as server:
        yield server


def http_json(url: str, payload: Any = None) -> Any:
    data = None if payload is None else json.dumps(payload).encode()
    req = urllib.request.Request(url, data=data, method="GET" if data is None else "POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=5) as resp:
        return json.loads(resp.read())


def test_repo_fetch(memfake: FakeGitHub) -> None:
    repo = client(memfake).get_repo("acme/review")
    assert repo.full_name == memfake.full_name == "acme/review"
    assert repo.default_branch == "main"
    assert repo.owner.login == "acme"
    assert repo.url == f"{memfake.base_url}/repos/acme/review"
    with pytest.raises(UnknownObjectException):
        client(memfake).get_repo("acme/other")


def test_branches_refs_and_commits_are_read_live_from_the_bare_repo(fake: FakeGitHub, origin: Origin) -> None:
    repo = client(fake).get_repo(fake.full_name)
    assert repo.get_branch(BRANCH).commit.sha == origin.sha(BRANCH)
    ref = repo.get_git_ref(f"heads/{BRANCH}")
    assert ref.ref == f"refs/heads/{BRANCH}" and ref.object.sha == origin.sha(BRANCH)

    # what is pushed afterwards is what the fake sees, with no restart
    new_sha = origin.commit("reports/b.md", "report b\n", "Add report b")
    git(origin.work, "push", "-q", "origin", BRANCH)
    assert repo.get_git_ref(f"heads/{BRANCH}").object.sha == new_sha
    git_commit = repo.get_git_commit(new_sha)
    assert git_commit.message == "Add report b"
    assert git_commit.author.name == "Test Author" and git_commit.parents[0].sha == origin.sha(f"{BRANCH}~1")
    assert repo.get_commit(new_sha).commit.message == "Add report b"
    assert repo.get_commit(BRANCH).sha == new_sha
    assert [r.ref for r in repo.get_git_matching_refs("heads/research-refresh/")] == [f"refs/heads/{BRANCH}"]

    with pytest.raises(UnknownObjectException):
        repo.get_branch("research-refresh/2026-H1")
    with pytest.raises(UnknownObjectException):
        repo.get_git_ref("heads/nope")

    # ref writes go into the real repository; a non-fast-forward without force is refused
    main_sha = origin.sha("main")
    created = repo.create_git_ref("refs/heads/scratch", main_sha)
    assert origin.sha("scratch") == main_sha
    created.edit(new_sha, force=False)
    assert origin.sha("scratch") == new_sha
    with pytest.raises(GithubException) as info:
        created.edit(main_sha, force=False)
    assert info.value.status == 422 and "not a fast forward" in str(info.value.data)
    created.edit(main_sha, force=True)
    assert origin.sha("scratch") == main_sha
    with pytest.raises(GithubException) as info:
        repo.create_git_ref("refs/heads/scratch", main_sha)
    assert info.value.status == 422 and "already exists" in str(info.value.data)
    created.delete()
    with pytest.raises(UnknownObjectException):
        repo.get_git_ref("heads/scratch")


def test_create_list_and_duplicate_pull(fake: FakeGitHub, origin: Origin) -> None:
    repo = client(fake).get_repo(fake.full_name)
    pr = repo.create_pull(base="main", head=BRANCH, title="Research refresh 2026-H2", body="Body", draft=True)
    assert pr.number == 1 and pr.state == "open" and pr.draft is True
    assert pr.head.ref == BRANCH and pr.head.label == f"acme:{BRANCH}" and pr.head.sha == origin.sha(BRANCH)
    assert pr.base.ref == "main" and pr.user.login == "research-dispatch[bot]"
    assert pr.url == f"{fake.base_url}/repos/acme/review/pulls/1"
    assert pr.issue_url == f"{fake.base_url}/repos/acme/review/issues/1"
    assert pr.commits == 1 and pr.changed_files == 1 and pr.merged is False

    found = repo.get_pulls(state="open", head=f"acme:{BRANCH}", base="main")
    assert found.totalCount == 1 and [p.number for p in found] == [1]
    assert list(repo.get_pulls(state="open", head="acme:research-refresh/2026-H1", base="main")) == []
    assert list(repo.get_pulls(state="closed")) == []

    with pytest.raises(GithubException) as info:
        repo.create_pull(base="main", head=f"acme:{BRANCH}", title="again", body="x")
    assert info.value.status == 422
    assert info.value.data["errors"][0]["message"] == f"A pull request already exists for acme:{BRANCH}."
    assert len(fake.pulls) == 1


def test_pull_needs_commits_when_backed_by_a_repository(fake: FakeGitHub) -> None:
    repo = client(fake).get_repo(fake.full_name)
    for head in ("research-refresh/missing", "main"):
        with pytest.raises(GithubException) as info:
            repo.create_pull(base="main", head=head, title="t", body="b")
        assert info.value.status == 422
        assert info.value.data["errors"][0]["message"] == f"No commits between main and {head}"
    assert fake.pulls == []


def test_edit_labels_and_comments(memfake: FakeGitHub) -> None:
    repo = client(memfake).get_repo(memfake.full_name)
    pr = repo.create_pull(base="main", head=BRANCH, title="old", body="old body")
    pr.edit(title="Research refresh 2026-H2", body="new body\n<!-- research-dispatch -->")
    assert pr.title == "Research refresh 2026-H2"
    again = repo.get_pull(pr.number)
    assert again.body == "new body\n<!-- research-dispatch -->"

    with pytest.raises(UnknownObjectException):
        repo.get_label("research")
    repo.create_label("research", "0e8a16", "Automated literature refresh")
    assert repo.get_label("research").color == "0e8a16"
    pr.add_to_labels("research", "needs-review")  # the second one does not exist yet: auto-created
    assert [label.name for label in pr.get_labels()] == ["research", "needs-review"]
    assert [label.name for label in repo.get_pull(pr.number).labels] == ["research", "needs-review"]
    assert {label["name"] for label in memfake.labels} == {"research", "needs-review"}
    with pytest.raises(GithubException) as info:
        repo.create_label("Research", "ffffff")
    assert info.value.status == 422

    comment = pr.create_issue_comment("Route table unchanged.")
    assert comment.body == "Route table unchanged." and comment.user.login == "research-dispatch[bot]"
    pr.create_issue_comment("Someone else pushed to the branch; not force-pushing.")
    assert [c.body for c in pr.get_issue_comments()] == [
        "Route table unchanged.", "Someone else pushed to the branch; not force-pushing."]
    comment.edit("Route table updated.")
    assert memfake.comments[pr.number][0]["body"] == "Route table updated."
    assert repo.get_issue(pr.number).comments == 2


def test_draft_round_trip_through_graphql(memfake: FakeGitHub) -> None:
    repo = client(memfake).get_repo(memfake.full_name)
    pr = repo.create_pull(base="main", head=BRANCH, title="t", body="b", draft=True)
    assert pr.draft is True
    pr.mark_ready_for_review()
    assert pr.draft is False and repo.get_pull(pr.number).draft is False
    pr.convert_to_draft()
    assert pr.draft is True and memfake.pull(pr.number)["draft"] is True
    pr.edit(title="REST cannot change draft")  # GitHub ignores `draft` on PATCH; so does the fake
    assert repo.get_pull(pr.number).draft is True
    graphql = [req for req, _ in memfake.requests if req.path == "/graphql"]
    assert len(graphql) == 2
    assert graphql[0].json()["variables"]["input"]["pullRequestId"] == pr.node_id


def test_close_an_older_cycles_pull(memfake: FakeGitHub) -> None:
    old = memfake.seed_pull(head="research-refresh/2026-H1", title="Research refresh 2026-H1",
                            labels=["research"])
    repo = client(memfake).get_repo(memfake.full_name)
    stale = [p for p in repo.get_pulls(state="open", base="main")
             if p.head.ref.startswith("research-refresh/") and p.head.ref != BRANCH]
    assert [p.number for p in stale] == [old["number"]]
    stale[0].edit(state="closed")
    assert stale[0].state == "closed" and stale[0].closed_at is not None
    assert list(repo.get_pulls(state="open")) == []
    assert [p.number for p in repo.get_pulls(state="closed")] == [old["number"]]


def test_body_limit_is_65536_characters(memfake: FakeGitHub) -> None:
    repo = client(memfake).get_repo(memfake.full_name)
    with pytest.raises(GithubException) as info:
        repo.create_pull(base="main", head=BRANCH, title="t", body="x" * 65_537)
    assert info.value.status == 422
    assert "body is too long (maximum is 65536 characters)" in str(info.value.data)
    pr = repo.create_pull(base="main", head=BRANCH, title="t", body="é" * 65_536)
    assert len(repo.get_pull(pr.number).body) == 65_536
    with pytest.raises(GithubException):
        pr.edit(body="y" * 70_000)


def test_bad_token(memfake: FakeGitHub) -> None:
    with pytest.raises(BadCredentialsException):
        client(memfake, token="wrong").get_repo(memfake.full_name)
    # a JWT-style Bearer header with the right token is accepted too
    req = urllib.request.Request(f"{memfake.base_url}/repos/acme/review",
                                 headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(req, timeout=5) as resp:
        assert json.loads(resp.read())["full_name"] == "acme/review"


def test_a_read_only_token_reads_and_is_refused_every_write() -> None:
    """A job granted `pull-requests: read` (the workflow's plan job): GitHub lets its token list pulls and
    answers 403 "Resource not accessible by integration" to any write."""
    with FakeGitHub(token=TOKEN, read_tokens=("ghs_read_only",)) as fake:
        fake.seed_pull(head=BRANCH, title="closed", state="closed")
        repo = client(fake, token="ghs_read_only").get_repo(fake.full_name)
        assert [p.title for p in repo.get_pulls(state="closed")] == ["closed"]
        with pytest.raises(GithubException) as info:
            repo.create_label("x", "ededed")
        assert info.value.status == 403 and "Resource not accessible by integration" in str(info.value.data)
        with pytest.raises(BadCredentialsException):
            client(fake, token="ghs_unknown").get_repo(fake.full_name)


def test_rate_limit_rule(memfake: FakeGitHub) -> None:
    memfake.set_scenario({"rules": [{"method": "GET", "path": "/repos/*/pulls", "rate_limit": True}]})
    repo = client(memfake).get_repo(memfake.full_name)
    with pytest.raises(RateLimitExceededException) as info:
        list(repo.get_pulls(state="open"))
    assert info.value.status == 403 and info.value.headers["x-ratelimit-remaining"] == "0"
    assert int(info.value.headers["x-ratelimit-reset"]) > 0


def test_502_once_then_success(memfake: FakeGitHub) -> None:
    memfake.set_scenario({"rules": [{"method": "POST", "path": "/repos/*/pulls", "on_call": 1,
                                     "status": 502, "retry_after": "1"}]})
    repo = client(memfake).get_repo(memfake.full_name)
    with pytest.raises(GithubException) as info:
        repo.create_pull(base="main", head=BRANCH, title="t", body="b")
    assert info.value.status == 502 and info.value.headers["retry-after"] == "1"
    assert memfake.pulls == []
    assert repo.create_pull(base="main", head=BRANCH, title="t", body="b").number == 1
    assert memfake.state()["fired"] == [{"rule": 0, "method": "POST", "path": "/repos/acme/review/pulls",
                                         "call": 1}]


def test_create_then_fail_simulates_a_lost_response(memfake: FakeGitHub) -> None:
    memfake.set_scenario({"rules": [{"method": "POST", "path": "/repos/*/pulls", "times": 1,
                                     "status": 502, "create_then_fail": True}]})
    repo = client(memfake).get_repo(memfake.full_name)
    with pytest.raises(GithubException) as info:
        repo.create_pull(base="main", head=BRANCH, title="t", body="b")
    assert info.value.status == 502
    assert [p["number"] for p in memfake.pulls] == [1]  # created all the same
    with pytest.raises(GithubException) as info:
        repo.create_pull(base="main", head=BRANCH, title="t", body="b")
    assert info.value.status == 422 and "already exists" in str(info.value.data)
    assert [p.number for p in repo.get_pulls(state="open", head=f"acme:{BRANCH}", base="main")] == [1]


def test_head_filter_without_owner_is_ignored_like_github(memfake: FakeGitHub) -> None:
    memfake.seed_pull(head="research-refresh/2026-H1")
    memfake.seed_pull(head=BRANCH)
    repo = client(memfake).get_repo(memfake.full_name)
    assert len(list(repo.get_pulls(state="open", head=BRANCH))) == 2
    assert [p.head.ref for p in repo.get_pulls(state="open", head=f"acme:{BRANCH}")] == [BRANCH]


def test_pagination_link_header_and_total_count(memfake: FakeGitHub) -> None:
    for n in range(5):
        memfake.seed_pull(head=f"feature/{n}")
    pulls = client(memfake, per_page=2).get_repo(memfake.full_name).get_pulls(state="all")
    assert pulls.totalCount == 5
    assert [p.number for p in pulls] == [5, 4, 3, 2, 1]


def test_user_and_rate_limit(memfake: FakeGitHub) -> None:
    gh = client(memfake)
    assert gh.get_user().login == "research-dispatch[bot]"
    core = gh.get_rate_limit().resources.core
    assert core.limit == 5000 and 0 < core.remaining < 5000


def test_scenario_state_and_reset_over_http(memfake: FakeGitHub) -> None:
    assert http_json(f"{memfake.base_url}/__fake__/scenario", {
        "rules": [{"path": "/repos/*/labels", "method": "POST", "status": 503}],
        "seed": {"next_number": 41, "pulls": [{"head": "research-refresh/2026-H1", "labels": ["research"]}]},
    }) == {"ok": True, "rules": 1}
    repo = client(memfake).get_repo(memfake.full_name)
    with pytest.raises(GithubException) as info:
        repo.create_label("x", "ffffff")
    assert info.value.status == 503
    state = http_json(f"{memfake.base_url}/__fake__/state")
    assert [p["number"] for p in state["pulls"]] == [41]
    assert state["pulls"][0]["labels"][0]["name"] == "research"
    assert state["refs"] == {"refs/heads/main": repo.get_branch("main").commit.sha}
    with pytest.raises(urllib.error.HTTPError):
        http_json(f"{memfake.base_url}/__fake__/scenario", {"rules": [{"pth": "typo"}]})
    http_json(f"{memfake.base_url}/__fake__/reset", {})
    assert memfake.pulls == [] and memfake.labels == []
    assert repo.create_label("x", "ffffff").name == "x"


def test_absolute_urls_always_use_base_url(fake: FakeGitHub) -> None:
    gh = client(fake)
    repo = gh.get_repo(fake.full_name)
    pr = repo.create_pull(base="main", head=BRANCH, title="t", body="b", draft=True)
    pr.add_to_labels("research")
    pr.create_issue_comment("hello")
    pr.mark_ready_for_review()
    list(repo.get_pulls(state="all"))
    repo.get_branch(BRANCH)
    repo.get_git_ref(f"heads/{BRANCH}")
    repo.get_issue(pr.number)
    gh.get_user().login  # noqa: B018 - forces the lazy fetch
    urls: set[str] = set()
    for _, response in fake.requests:
        urls.update(re.findall(r'https?://[^"\s<>]+', response.body.decode()))
        urls.update(re.findall(r"<(https?://[^>]+)>", response.headers.get("Link", "")))
    assert urls
    foreign = {u for u in urls if not u.startswith((fake.base_url + "/", "https://github.invalid/",
                                                     "https://docs.github.com/", "git@"))}
    assert foreign == set()


def test_state_is_deterministic_across_servers() -> None:
    def run() -> str:
        with FakeGitHub(token=TOKEN) as server:
            repo = client(server).get_repo(server.full_name)
            pr = repo.create_pull(base="main", head=BRANCH, title="t", body="b", draft=True)
            pr.add_to_labels("research")
            pr.create_issue_comment("c")
            pr.mark_ready_for_review()
            return json.dumps(server.state(), sort_keys=True).replace(server.base_url, "BASE")

    first = run()
    assert first == run()
    assert '"created_at": "2026-11-30T00:00:01Z"' in first


# ----------------------------------------------------------------------------------------------
# What GitHub refuses by design (publish/pulls.py's docstring): drafts on some plans, GraphQL draft conversions with the
# Actions token, label creation without `issues: write`, reviewers who are not collaborators.


def raw_post(fake: FakeGitHub, path: str, payload: Any) -> tuple[int, Any]:
    """A POST without PyGithub, to see the exact status and body GitHub would send."""
    req = urllib.request.Request(f"{fake.base_url}{path}", data=json.dumps(payload).encode(), method="POST",
                                 headers={"Content-Type": "application/json", "Authorization": f"token {TOKEN}"})
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_a_repository_without_drafts_refuses_a_draft_pull_with_422(memfake: FakeGitHub) -> None:
    memfake.configure(drafts_supported=False)
    repo = client(memfake).get_repo(memfake.full_name)
    with pytest.raises(GithubException) as caught:
        repo.create_pull(base="main", head=BRANCH, title="t", body="b", draft=True)
    assert caught.value.status == 422
    assert caught.value.data["message"] == "Draft pull requests are not supported in this repository."
    assert memfake.pulls == []
    pr = repo.create_pull(base="main", head=BRANCH, title="t", body="b", draft=False)
    assert pr.draft is False
    with pytest.raises(GithubException):  # nor can an open PR become a draft
        pr.convert_to_draft()
    assert memfake.pull(pr.number)["draft"] is False


def test_the_actions_token_gets_graphql_forbidden_in_an_http_200(memfake: FakeGitHub) -> None:
    repo = client(memfake).get_repo(memfake.full_name)
    pr = repo.create_pull(base="main", head=BRANCH, title="t", body="b", draft=True)
    memfake.set_scenario({"settings": {"token_kind": "actions"}})
    status, body = raw_post(memfake, "/graphql", {
        "query": "mutation ($input: MarkPullRequestReadyForReviewInput!) { markPullRequestReadyForReview"
                 "(input: $input) { clientMutationId } }",
        "variables": {"input": {"pullRequestId": pr.node_id}}})
    assert status == 200
    assert body["data"] == {"markPullRequestReadyForReview": None}
    assert body["errors"][0]["type"] == "FORBIDDEN"
    assert body["errors"][0]["message"] == "Resource not accessible by integration"
    with pytest.raises(GithubException) as caught:  # PyGithub raises for GraphQL errors
        pr.mark_ready_for_review()
    assert caught.value.data["errors"][0]["type"] == "FORBIDDEN"
    with pytest.raises(GithubException):
        pr.convert_to_draft()
    assert memfake.pull(pr.number)["draft"] is True
    memfake.configure(token_kind="app")  # a GitHub App token may
    pr.mark_ready_for_review()
    assert memfake.pull(pr.number)["draft"] is False


def test_creating_a_label_needs_issues_write(memfake: FakeGitHub) -> None:
    memfake.set_scenario({"seed": {"labels": [{"name": "automated", "color": "ededed"}]}})
    memfake.configure(issues_write=False)
    repo = client(memfake).get_repo(memfake.full_name)
    pr = repo.create_pull(base="main", head=BRANCH, title="t", body="b")
    with pytest.raises(GithubException) as caught:
        repo.create_label("partial", "d93f0b")
    assert caught.value.status == 403 and caught.value.data["message"] == "Resource not accessible by integration"
    with pytest.raises(GithubException) as caught:  # adding an unknown label would create it
        pr.add_to_labels("automated", "partial")
    assert caught.value.status == 403
    assert [label["name"] for label in memfake.labels] == ["automated"] and memfake.pull(pr.number)["labels"] == []
    pr.add_to_labels("automated")  # an existing label needs only pull-requests: write
    assert [label["name"] for label in memfake.pull(pr.number)["labels"]] == ["automated"]
    memfake.configure(issues_write=True)
    pr.add_to_labels("partial")
    assert {label["name"] for label in memfake.labels} == {"automated", "partial"}


def test_reviewers_must_be_collaborators(memfake: FakeGitHub) -> None:
    memfake.configure(collaborators=["octocat"])
    repo = client(memfake).get_repo(memfake.full_name)
    pr = repo.create_pull(base="main", head=BRANCH, title="t", body="b")
    with pytest.raises(GithubException) as caught:
        pr.create_review_request(reviewers=["octocat", "stranger"])
    assert caught.value.status == 422
    assert caught.value.data["message"].startswith("Reviews may only be requested from collaborators.")
    assert memfake.pull(pr.number)["requested_reviewers"] == []
    status, body = raw_post(memfake, f"/repos/acme/review/pulls/{pr.number}/requested_reviewers",
                            {"reviewers": ["octocat"]})
    assert status == 201 and [u["login"] for u in body["requested_reviewers"]] == ["octocat"]
    users, teams = repo.get_pull(pr.number).get_review_requests()
    assert [u.login for u in users] == ["octocat"] and list(teams) == []


# ----------------------------------------------------------------------------------------------
# Issues that are not pull requests, and Actions workflows (issue 30.1: the cannot-start issue and the
# schedule's state), each rule GitHub enforces checked through the real PyGithub client
# ----------------------------------------------------------------------------------------------


def test_issues_are_numbered_with_pulls_and_listed_with_them_by_label(memfake: FakeGitHub) -> None:
    memfake.seed_pull(head=BRANCH, title="refresh", labels=["research-refresh"])
    repo = client(memfake).get_repo(memfake.full_name)
    issue = repo.create_issue(title="cannot start", body="why", labels=["research-refresh", "automated"])
    assert issue.number == 2 and issue.pull_request is None and issue.state == "open"
    assert {label.name for label in issue.labels} == {"research-refresh", "automated"}
    listed = list(repo.get_issues(state="open", labels=["research-refresh"]))
    # GitHub's issue list holds pull requests too, each with a `pull_request` key
    assert sorted((i.number, i.pull_request is not None) for i in listed) == [(1, True), (2, False)]
    # every label named must be on the item
    assert [i.number for i in repo.get_issues(state="open", labels=["research-refresh", "automated"])] == [2]
    assert memfake.issues[0]["number"] == 2 and "pull_request" not in memfake.issues[0]


def test_an_issue_needs_a_title_and_issues_write(memfake: FakeGitHub) -> None:
    repo = client(memfake).get_repo(memfake.full_name)
    with pytest.raises(GithubException) as info:
        repo.create_issue(title="")
    assert info.value.status == 422 and info.value.data["errors"][0] == {
        "resource": "Issue", "field": "title", "code": "missing_field"}
    memfake.configure(issues_write=False)
    with pytest.raises(GithubException) as info:
        repo.create_issue(title="cannot start")
    assert info.value.status == 403 and memfake.issues == []


def test_closing_an_issue_takes_githubs_state_reasons_only(memfake: FakeGitHub) -> None:
    repo = client(memfake).get_repo(memfake.full_name)
    issue = repo.create_issue(title="cannot start")
    issue.create_comment("still failing")
    with pytest.raises(GithubException) as info:
        issue.edit(state="closed", state_reason="fixed")
    assert info.value.status == 422 and repo.get_issue(issue.number).state == "open"  # nothing applied
    with pytest.raises(GithubException):
        issue.edit(state="done")
    issue.edit(state="closed", state_reason="completed")
    again = repo.get_issue(issue.number)
    assert (again.state, again.state_reason) == ("closed", "completed") and again.closed_at is not None
    assert [c.body for c in again.get_comments()] == ["still failing"]
    assert list(repo.get_issues(state="open")) == []
    assert [i.number for i in repo.get_issues(state="closed")] == [issue.number]


def test_an_issues_token_writes_issues_only() -> None:
    """A job granted only `issues: write` (the workflow's notify job): it may open, comment on and close
    issues, and is refused any write to a pull request or a ref."""
    with FakeGitHub(token=TOKEN, issue_tokens=("ghs_issues",)) as fake:
        fake.seed_pull(head=BRANCH, title="refresh")
        repo = client(fake, token="ghs_issues").get_repo(fake.full_name)
        issue = repo.create_issue(title="cannot start", labels=["research-refresh"])
        issue.create_comment("still failing")
        issue.edit(state="closed", state_reason="completed")
        pull = repo.get_pull(1)
        with pytest.raises(GithubException) as info:
            pull.edit(title="hijacked")
        assert info.value.status == 403
        with pytest.raises(GithubException) as info:
            pull.create_issue_comment("hello")
        assert info.value.status == 403
        assert fake.pulls[0]["title"] == "refresh"


def test_workflows_come_from_the_default_branch_with_githubs_states(origin: Origin) -> None:
    origin.commit(".github/workflows/research-refresh-schedule.yml",
                  "name: research-refresh-schedule\non:\n  schedule:\n    - cron: '17 6 1 1,7 *'\n", "Add the schedule")
    git(origin.work, "push", "-q", "origin", "HEAD:main")
    with FakeGitHub(git_dir=origin.bare, token=TOKEN, read_tokens=("ghs_read",)) as fake:
        repo = client(fake, token="ghs_read").get_repo(fake.full_name)
        workflow = repo.get_workflow("research-refresh-schedule.yml")
        assert (workflow.name, workflow.path, workflow.state) == (
            "research-refresh-schedule", ".github/workflows/research-refresh-schedule.yml", "active")
        assert repo.get_workflow(workflow.id).path == workflow.path
        with pytest.raises(UnknownObjectException):
            repo.get_workflow("research-refresh.yml")  # not on the default branch
        fake.set_workflow_state("research-refresh-schedule.yml", "disabled_inactivity")
        assert repo.get_workflow("research-refresh-schedule.yml").state == "disabled_inactivity"
        with pytest.raises(ValueError, match="disabled_inactivity"):
            fake.set_workflow_state("research-refresh-schedule.yml", "paused")
        assert not repo.get_workflow("research-refresh-schedule.yml").enable()  # a read token: 403
        assert client(fake).get_repo(fake.full_name).get_workflow("research-refresh-schedule.yml").enable()
        assert fake.workflow_state("research-refresh-schedule.yml") == "active"
        fake.configure(actions_read=False)  # a token without `actions: read`
        with pytest.raises(GithubException) as info:
            repo.get_workflow("research-refresh-schedule.yml")
        assert info.value.status == 403 and "Resource not accessible by integration" in str(info.value.data)


def test_workflow_states_from_the_seed_and_a_memory_repository() -> None:
    with FakeGitHub(token=TOKEN, workflows={"research-refresh-schedule.yml": "active"}) as fake:
        fake.set_scenario({"seed": {"workflows": {"research-refresh-schedule.yml": "disabled_manually"}}})
        state = client(fake).get_repo(fake.full_name).get_workflow("research-refresh-schedule.yml").state
        assert state == "disabled_manually" == fake.state()["workflows"]["research-refresh-schedule.yml"]
        with pytest.raises(ValueError):
            fake.set_scenario({"seed": {"workflows": {"research-refresh-schedule.yml": "sleeping"}}})
    with pytest.raises(ValueError):
        FakeGitHub(workflows={"x.yml": "off"})
