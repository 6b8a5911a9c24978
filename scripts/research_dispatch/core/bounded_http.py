"""An httpx2 client whose every request is held to a `bounds.CallBounds`: deadline, size, interrupt.

Why a transport and not the client's `timeout`: httpx2's timeouts are per read, so a server that sends
one byte every 0.3 s (in the headers or in the body) never trips them, and a body that never ends grows
memory without limit. Here, while a call runs inside `bounded(bounds, what)` on the calling thread:

* every socket read and write of the connection goes through a network backend that checks the bounds
  first and never blocks longer than what is left of the deadline — in slices of at most `POLL_S`, so an
  interrupt (Ctrl-C sets the run's event) is noticed within a fraction of a second even on a silent
  socket, while a read still fails with the configured per-read timeout when the server is just slow;
* the response body passes through `bounds.guard_chunks`, so it is cut at `max_bytes` (bounded memory).

Crossing a bound raises `CallTimedOut`, `ResponseTooLarge` or `Interrupted`. These are not httpx2
errors, so the openai client passes them through unchanged (it wraps only httpx2's own), and the
gateway turns them into typed gateway errors.

Outside `bounded(...)` (or on another thread) requests behave as plain httpx2 ones.

Only public interfaces: the transport is our own `httpx2.BaseTransport` over httpcore2's `ConnectionPool`,
to which the bounded backend is handed through its `network_backend` argument (the hook httpcore2 offers
for exactly this), and the client is an ordinary `httpx2.Client(transport=...)` handed to `openai.OpenAI(
http_client=...)`. Nothing reaches into a private attribute, so a library upgrade cannot silently turn the
read bounds off. As with any `transport=`, httpx2 mounts no proxy from the environment.
"""

from __future__ import annotations

import contextlib
import ssl
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

import httpcore2
import httpx2

from research_dispatch.core.bounds import MIN_READ_TIMEOUT_S, CallBounds, guard_chunks

T = TypeVar("T")
POLL_S = 0.25
"""Longest single blocking read: how soon a silent socket notices an interrupt or the deadline."""

_active = threading.local()

DEFAULT_LIMITS = httpx2.Limits(max_connections=100, max_keepalive_connections=20, keepalive_expiry=5.0)
"""httpx2's own defaults for a client's pool."""


@contextlib.contextmanager
def bounded(bounds: CallBounds, what: str) -> Iterator[None]:
    """Hold every request made on this thread inside the block to `bounds` (`what` names the call)."""
    previous = getattr(_active, "call", None)
    _active.call = (bounds, what)
    try:
        yield
    finally:
        _active.call = previous


def current() -> tuple[CallBounds, str] | None:
    """The bounds of the call in flight on this thread (and what it is), or None outside `bounded`."""
    call: tuple[CallBounds, str] | None = getattr(_active, "call", None)
    return call


def sliced_read(read: Callable[[float], T], timeout: float | None, bounds: CallBounds, what: str,
                timed_out: type[BaseException]) -> T:
    """One blocking read held to `bounds`: `read(wait)` is tried in slices of at most `POLL_S` (never past
    the deadline), the bounds checked before each, so an interrupt or the deadline ends a read on a silent
    socket at once; the read still fails with `timed_out` when the configured per-read `timeout` passes
    without a byte (an ordinary, retryable timeout). The one slicing rule of both HTTP stacks: httpx2's
    network streams here, and the sockets of `requests` (`search_http`)."""
    gives_up_at = None if timeout is None else bounds.clock() + timeout
    while True:
        bounds.check(what)
        wait = min(POLL_S, _clamp(None, bounds))
        if gives_up_at is not None:
            wait = max(MIN_READ_TIMEOUT_S, min(wait, gives_up_at - bounds.clock()))
        try:
            return read(wait)
        except timed_out:
            if gives_up_at is not None and bounds.clock() >= gives_up_at:
                raise  # the configured per-read timeout: an ordinary (retryable) timeout


def _clamp(timeout: float | None, bounds: CallBounds) -> float:
    left = max(MIN_READ_TIMEOUT_S, bounds.remaining())
    return left if timeout is None else max(MIN_READ_TIMEOUT_S, min(timeout, left))


class _BoundedStream(httpcore2.NetworkStream):
    def __init__(self, inner: httpcore2.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        call = current()
        if call is None:
            return self._inner.read(max_bytes, timeout)
        return sliced_read(lambda wait: self._inner.read(max_bytes, wait), timeout, *call, httpcore2.ReadTimeout)

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        call = current()
        if call is None:
            self._inner.write(buffer, timeout)
            return
        bounds, what = call
        bounds.check(what)
        self._inner.write(buffer, _clamp(timeout, bounds))

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                  timeout: float | None = None) -> httpcore2.NetworkStream:
        call = current()
        if call is not None:
            call[0].check(call[1])
            timeout = _clamp(timeout, call[0])
        return _BoundedStream(self._inner.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _BoundedBackend(httpcore2.NetworkBackend):
    def __init__(self, inner: httpcore2.NetworkBackend) -> None:
        self._inner = inner

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options: Iterable[Any] | None = None) -> httpcore2.NetworkStream:
        call = current()
        if call is not None:
            call[0].check(call[1])
            timeout = _clamp(timeout, call[0])
        return _BoundedStream(self._inner.connect_tcp(host, port, timeout, local_address, socket_options))

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options: Iterable[Any] | None = None) -> httpcore2.NetworkStream:
        call = current()
        if call is not None:
            call[0].check(call[1])
            timeout = _clamp(timeout, call[0])
        return _BoundedStream(self._inner.connect_unix_socket(path, timeout, socket_options))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


#: httpcore2's errors as httpx2's (the most specific first), which the openai client knows how to
#: treat; the bounds' own errors are neither and pass through unchanged.
_MAPPED: tuple[tuple[type[Exception], type[httpx2.HTTPError]], ...] = (
    (httpcore2.ConnectTimeout, httpx2.ConnectTimeout), (httpcore2.ReadTimeout, httpx2.ReadTimeout),
    (httpcore2.WriteTimeout, httpx2.WriteTimeout), (httpcore2.PoolTimeout, httpx2.PoolTimeout),
    (httpcore2.TimeoutException, httpx2.TimeoutException), (httpcore2.ConnectError, httpx2.ConnectError),
    (httpcore2.ReadError, httpx2.ReadError), (httpcore2.WriteError, httpx2.WriteError),
    (httpcore2.NetworkError, httpx2.NetworkError), (httpcore2.ProxyError, httpx2.ProxyError),
    (httpcore2.UnsupportedProtocol, httpx2.UnsupportedProtocol),
    (httpcore2.LocalProtocolError, httpx2.LocalProtocolError),
    (httpcore2.RemoteProtocolError, httpx2.RemoteProtocolError), (httpcore2.ProtocolError, httpx2.ProtocolError),
)


@contextlib.contextmanager
def _as_httpx2_errors() -> Iterator[None]:
    try:
        yield
    except Exception as exc:
        mapped = next((theirs for ours, theirs in _MAPPED if isinstance(exc, ours)), None)
        if mapped is None:
            raise
        raise mapped(str(exc)) from exc


class _Body(httpx2.SyncByteStream):
    """A response body as httpx2 reads it: httpcore2's errors mapped, and inside `bounded(...)` passed
    through `guard_chunks` (the deadline between chunks, the size cap, the interrupt)."""

    def __init__(self, inner: Iterable[bytes], call: tuple[CallBounds, str] | None) -> None:
        self._inner = inner
        self._call = call

    def __iter__(self) -> Iterator[bytes]:
        with _as_httpx2_errors():
            if self._call is None:
                yield from self._inner
            else:
                yield from guard_chunks(self._inner, *self._call)

    def close(self) -> None:
        close = getattr(self._inner, "close", None)
        if close is not None:
            close()


class BoundedTransport(httpx2.BaseTransport):
    """httpx2's transport contract over an httpcore2 connection pool whose every socket operation goes
    through `_BoundedBackend`; the response body is guarded while a `bounded(...)` call runs."""

    def __init__(self, *, verify: ssl.SSLContext | bool = True, limits: httpx2.Limits = DEFAULT_LIMITS) -> None:
        context = verify if isinstance(verify, ssl.SSLContext) else httpx2.create_ssl_context(verify=verify)
        self.backend = _BoundedBackend(httpcore2.SyncBackend())
        self._pool = httpcore2.ConnectionPool(
            ssl_context=context, network_backend=self.backend, max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections, keepalive_expiry=limits.keepalive_expiry)

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        call = current()
        if call is not None:
            call[0].check(call[1])
        assert isinstance(request.stream, httpx2.SyncByteStream)
        sent = httpcore2.Request(
            method=request.method,
            url=httpcore2.URL(scheme=request.url.raw_scheme, host=request.url.raw_host, port=request.url.port,
                              target=request.url.raw_path),
            headers=request.headers.raw, content=request.stream, extensions=request.extensions)
        with _as_httpx2_errors():
            response = self._pool.handle_request(sent)
        assert isinstance(response.stream, Iterable)
        return httpx2.Response(status_code=response.status, headers=response.headers,
                               stream=_Body(response.stream, call), extensions=response.extensions)

    def close(self) -> None:
        self._pool.close()


def bounded_client(*, verify: ssl.SSLContext | bool = True, **client_options: Any) -> httpx2.Client:
    """An httpx2 client whose transport is a `BoundedTransport` (hand it to `openai.OpenAI(http_client=)`)."""
    return httpx2.Client(transport=BoundedTransport(verify=verify), verify=verify, **client_options)
