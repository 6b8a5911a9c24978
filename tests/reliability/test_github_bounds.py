"""GitHub calls bounded as every other outbound call (issue 31, finding 8): the real PyGithub client, as
`publish` makes it (`publish/pulls.PullRequests`), against hostile HTTP servers in their own processes
(tests/tools/hostile_http.py). An API that trickles its headers a byte a second, or dribbles its body,
ends the call at `pr.api_timeout_s` as one `PublishError` line; a body that never ends stops at the size
cap. Before, the first held `publish` (and its lock) until killed, the second grew it without limit.

Times are bounded generously (a loaded machine must not fail the test); figures are printed for the
report (pytest -s).
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from github.Requester import Requester

from research_dispatch.config.settings import PRSettings
from research_dispatch.core.errors import PublishError
from research_dispatch.core.search_http import BoundedSession
from research_dispatch.publish.github_http import BoundedHTTPConnection, use_bounded_connections
from research_dispatch.publish.pulls import GitHubTarget, PullRequests, Retrier
from tests.memory import peak_rss_mb


def open_repository(base_url: str, *, retries: int = 0) -> tuple[str, float, int]:
    """Make the PR client against `base_url` (its first call reads the repository): the error, the seconds
    it took and the retries it waited for."""
    settings = PRSettings(api_timeout_s=2, api_retries=retries, api_backoff_s=0)
    retry = Retrier(settings, sleep=lambda _seconds: None)
    started = time.monotonic()
    with pytest.raises(PublishError) as raised:
        PullRequests(GitHubTarget(api_url=base_url, repository="octo/review", token="ghp_test0000"), settings, retry)
    elapsed = time.monotonic() - started
    print(f"{raised.value} ({elapsed:.2f} s, {len(retry.waits)} retries, peak RSS {peak_rss_mb()} MB)")
    return str(raised.value), elapsed, len(retry.waits)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["trickle", "slowloris"])
@pytest.mark.reliability(area="publish", case="GitHub API trickles its headers a byte a second, or dribbles its body",
                         expect="each attempt ends at pr.api_timeout_s (a whole-call deadline, not per read); "
                                "retried as a timeout, then one PublishError line")
def test_a_trickling_github_api_ends_at_the_call_deadline(hostile: Any, mode: str) -> None:
    message, seconds, retries = open_repository(hostile(mode), retries=1)
    assert "could not read the repository: no complete answer within pr.api_timeout_s" in message
    assert retries == 1
    assert seconds < 60  # 2 attempts of 2 s; a per-read timeout alone: until killed


@pytest.mark.slow
@pytest.mark.reliability(area="publish", case="GitHub API streams a body that never ends",
                         expect="reading stops at the size cap: one PublishError line, not retried; memory bounded")
def test_an_endless_github_answer_stops_at_the_size_cap(hostile: Any) -> None:
    message, seconds, retries = open_repository(hostile("endless"), retries=3)
    assert "could not read the repository" in message and "larger than" in message
    assert retries == 0  # an oversized answer is not asked for again
    assert seconds < 60


def test_pygithub_connections_are_the_bounded_ones() -> None:
    """A tripwire for PyGithub's internals: the connection class it is given keeps our session (and that
    session's connections read every socket read under the bounds)."""
    use_bounded_connections()
    connection = BoundedHTTPConnection("127.0.0.1", 9, timeout=2)
    assert isinstance(connection.session, BoundedSession)
    adapter = connection.session.get_adapter("http://127.0.0.1:9/")
    assert getattr(adapter, "reads_bounded", False)
    assert Requester._Requester__httpConnectionClass is BoundedHTTPConnection  # type: ignore[attr-defined]
