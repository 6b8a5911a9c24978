"""PyGithub's HTTP behind the bounds of every other outbound call (issue 31, finding 8).

Why: PyGithub's `timeout` is per socket read, so an API (or a proxy in front of it) that trickles a byte
a second kept `publish` silent until killed, holding the repository lock, and one that streamed an
endless body grew the process without limit. PyGithub sends every request through a connection object
that owns a `requests.Session`; the classes here are PyGithub's own with that session replaced by the
search clients' `core/search_http.BoundedSession`, and every request sent inside a `CallBounds` of
`pr.api_timeout_s` (the per-read timeout PyGithub is given, now a whole-call deadline too) and the common
response-size cap. So the status line, the headers and the body are all read under the deadline, and a
body past the cap stops reading at the cap.

The bound errors (`CallTimedOut`, `ResponseTooLarge`) reach `pulls.Retrier`, which retries a timeout like
a dropped connection and refuses an oversized answer at once. Ctrl-C and SIGTERM need no flag here:
`publish` runs on the main thread, where the interrupt handler raises between two read slices.

PyGithub takes its connection classes per process (`Requester.injectConnectionClasses`, its documented
seam); `use_bounded_connections` installs them before each `Github` client is made.
"""

from __future__ import annotations

from typing import Any

import requests
from github.Requester import HTTPRequestsConnectionClass, HTTPSRequestsConnectionClass, Requester, RequestsResponse

from research_dispatch.core.bounds import CallBounds
from research_dispatch.core.search_http import BoundedSession

DEFAULT_TIMEOUT_S = 30.0
"""The whole-call deadline when PyGithub is given no timeout (the product always gives `pr.api_timeout_s`)."""


class _Bounded:
    """What both connection classes add to PyGithub's: the bounded session, and each request sent within a
    `CallBounds` of the connection's timeout (`pr.api_timeout_s`). Listed first, so its methods wrap
    PyGithub's own."""

    timeout: int | None
    verb: str
    session: requests.Session

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pygithub: Any = super()
        pygithub.__init__(*args, **kwargs)
        self.bounded = BoundedSession()
        self.bounded.auth = Requester.noopAuth  # as PyGithub's own session: never fall back to a .netrc file
        self.session = self.bounded

    def getresponse(self) -> RequestsResponse:
        pygithub: Any = super()
        bounds = CallBounds.within(float(self.timeout or DEFAULT_TIMEOUT_S))
        with self.bounded.within(bounds, f"GitHub API {self.verb}"):
            response: RequestsResponse = pygithub.getresponse()
            return response


class BoundedHTTPConnection(_Bounded, HTTPRequestsConnectionClass):
    """PyGithub's plain-HTTP connection (a loopback API in tests and the demo), read under call bounds."""


class BoundedHTTPSConnection(_Bounded, HTTPSRequestsConnectionClass):
    """PyGithub's HTTPS connection (api.github.com, GitHub Enterprise), read under call bounds."""


def use_bounded_connections() -> None:
    """Make every `Github` client created after this read its responses under call bounds."""
    Requester.injectConnectionClasses(BoundedHTTPConnection, BoundedHTTPSConnection)
