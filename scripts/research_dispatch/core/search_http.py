"""A `requests.Session` whose every response is read under a `bounds.CallBounds`.

Why: tavily-python and exa-py send with `requests`, whose `timeout` is per read: a search server that
dribbles a byte every few hundred milliseconds never trips it, and a body that never ends is read into
memory whole. The search clients are handed this session; its adapter always streams the body and
passes it through `bounds.guard_chunks`, so a call ends at its deadline (capped by what is left of the
leg), at its size cap, or when the run is interrupted, whatever the server does. A blocked read is
bounded by the per-read timeout, never longer than what is left of the deadline
(`CallBounds.read_timeout`).

The bounds of the call in flight are set around each client call with `BoundedSession.within`, per
thread: a leg's tool calls of one turn run at once (`SearchTools.call_many`), each on its own thread, over
the same session, so each thread's requests are read under its own call's bounds.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import requests
from requests.adapters import HTTPAdapter

from research_dispatch.core.bounds import CallBounds, guard_chunks

READ_CHUNK = 64 * 1024


class BoundedAdapter(HTTPAdapter):
    """Streams each response body through `guard_chunks` under the owning session's current bounds."""

    def __init__(self, session: BoundedSession) -> None:
        super().__init__(max_retries=0)
        self._owner = session

    def send(self, request: requests.PreparedRequest, stream: bool = False,
             timeout: Any = None, verify: Any = True, cert: Any = None, proxies: Any = None) -> requests.Response:
        bounds = self._owner.bounds
        if bounds is None:  # a programming error: every call must say how long it may take
            raise RuntimeError("BoundedSession used outside `within(bounds)`")
        what = self._owner.what
        bounds.check(what)
        connect, read = _split_timeout(timeout)
        margin = self._owner.read_margin_s
        per_read = (bounds.read_timeout(connect + margin), bounds.read_timeout(read + margin))
        response = super().send(request, stream=True, timeout=per_read, verify=verify, cert=cert, proxies=proxies)
        try:
            body = b"".join(guard_chunks(_read1_chunks(response.raw), bounds, what))
        except BaseException:
            response.close()
            raise
        response._content = body  # what `Response.content` would have read, now bounded
        response._content_consumed = True
        response.close()
        return response


def _split_timeout(timeout: Any) -> tuple[float, float]:
    default = 30.0
    if isinstance(timeout, tuple) and len(timeout) == 2:
        connect, read = timeout
        return float(connect or default), float(read or default)
    if isinstance(timeout, int | float):
        return float(timeout), float(timeout)
    return default, default


def _read1_chunks(raw: Any) -> Iterator[bytes]:
    """The body as it arrives: `read1` returns what one socket read gave, so a dribbling body yields
    often (and the deadline is checked often) instead of blocking until a full buffer."""
    while True:
        data = raw.read1(READ_CHUNK)
        if not data:
            return
        yield data


class BoundedSession(requests.Session):
    """A session whose responses are read under the bounds set with `within`."""

    def __init__(self) -> None:
        super().__init__()
        self._call = threading.local()  # the bounds of the call in flight on each thread
        adapter = BoundedAdapter(self)
        self.mount("https://", adapter)
        self.mount("http://", adapter)

    @property
    def bounds(self) -> CallBounds | None:
        bounds: CallBounds | None = getattr(self._call, "bounds", None)
        return bounds

    @property
    def what(self) -> str:
        return str(getattr(self._call, "what", "request"))

    @property
    def read_margin_s(self) -> float:
        return float(getattr(self._call, "read_margin_s", 0.0))

    @contextmanager
    def within(self, bounds: CallBounds, what: str, *, read_margin_s: float = 0.0) -> Iterator[None]:
        """Read every response this thread sends inside this block under `bounds`; `read_margin_s` is added
        to the client's per-read timeout (still capped by the deadline)."""
        previous = self.bounds, self.what, self.read_margin_s
        self._call.bounds, self._call.what, self._call.read_margin_s = bounds, what, read_margin_s
        try:
            yield
        finally:
            self._call.bounds, self._call.what, self._call.read_margin_s = previous
