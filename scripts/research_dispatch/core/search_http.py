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

**Every read, headers too.** `requests` (urllib3, http.client) reads a response through a buffered file
over its socket, and a per-read timeout lets a server that trickles its status line and headers a byte
at a time hold the call for ever. So the adapter's connections wrap their socket once connected
(`_DeadlineSocket`): while a request is sent inside `BoundedAdapter.send`, every read of that socket —
status line, headers, body — is made in slices that never pass the call's deadline and notice an
interrupt (`bounded_http.sliced_read`, the slicing rule of the httpx2 clients too; its bounds are the
sending thread's). PyGithub's session is one of these (`publish/github_http.py`), so the GitHub API is
held to the same bounds as the search services and the gateway.
"""

from __future__ import annotations

import io
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import requests
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from research_dispatch.core.bounded_http import bounded, current, sliced_read
from research_dispatch.core.bounds import CallBounds, guard_chunks

T = TypeVar("T")

READ_CHUNK = 64 * 1024


class _DeadlineSocket:
    """A connected socket (plain or TLS) whose reads are held to the bounds of the call in flight on this
    thread (`bounded_http.bounded`); outside a bounded call it reads as the socket it wraps. Everything
    but reading is the wrapped socket's own."""

    def __init__(self, inner: socket.socket) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def _read(self, read: Callable[[], T]) -> T:
        call = current()
        if call is None:
            return read()
        configured = self._inner.gettimeout()

        def attempt(wait: float) -> T:
            self._inner.settimeout(wait)
            return read()

        try:
            return sliced_read(attempt, configured, *call, TimeoutError)
        finally:
            self._inner.settimeout(configured)

    def recv_into(self, buffer: Any, nbytes: int = 0, flags: int = 0) -> int:
        return self._read(lambda: self._inner.recv_into(buffer, nbytes, flags))

    def recv(self, bufsize: int, flags: int = 0) -> bytes:
        return self._read(lambda: self._inner.recv(bufsize, flags))

    def makefile(self, mode: str = "r", buffering: int | None = None, **_text: Any) -> Any:
        """What http.client reads the response through (`makefile("rb")`): a buffered reader whose raw
        reads are this wrapper's `recv_into`, so the status line and the headers are bounded too."""
        inner: Any = self._inner
        if mode != "rb":
            return inner.makefile(mode, buffering, **_text)
        inner._io_refs += 1  # as socket.makefile counts its readers (SocketIO.close gives it back)
        raw: Any = socket.SocketIO(self, "rb")  # type: ignore[arg-type]
        return io.BufferedReader(raw, buffering if buffering and buffering > 0 else io.DEFAULT_BUFFER_SIZE)


class _BoundedHTTPConnection(HTTPConnection):
    def connect(self) -> None:
        super().connect()
        self.sock = _DeadlineSocket(self.sock)  # a socket in all but its reads


class _BoundedHTTPSConnection(HTTPSConnection):
    def connect(self) -> None:
        super().connect()
        self.sock = _DeadlineSocket(self.sock)  # a socket in all but its reads


class _BoundedHTTPPool(HTTPConnectionPool):
    ConnectionCls = _BoundedHTTPConnection


class _BoundedHTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _BoundedHTTPSConnection


_POOLS = {"http": _BoundedHTTPPool, "https": _BoundedHTTPSPool}


class BoundedAdapter(HTTPAdapter):
    """Streams each response body through `guard_chunks` under the owning session's current bounds, over
    connections whose every socket read is bounded too (`_DeadlineSocket`)."""

    def __init__(self, session: BoundedSession) -> None:
        super().__init__(max_retries=0)
        self._owner = session

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = dict(_POOLS)

    def proxy_manager_for(self, proxy: str, **proxy_kwargs: Any) -> Any:
        manager = super().proxy_manager_for(proxy, **proxy_kwargs)
        manager.pool_classes_by_scheme = dict(_POOLS)
        return manager

    @property
    def reads_bounded(self) -> bool:
        """Every connection this adapter opens reads under the call's bounds (a test checks it, so a change
        of urllib3's internals cannot silently turn the socket bounds off)."""
        return self.poolmanager.pool_classes_by_scheme == _POOLS

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
        with bounded(bounds, what):  # every socket read below, headers included (`_DeadlineSocket`)
            response = super().send(request, stream=True, timeout=per_read, verify=verify, cert=cert,
                                    proxies=proxies)
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
