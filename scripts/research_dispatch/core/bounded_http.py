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

The backend is installed into the connection pool of httpx2's own transport (`_pool._network_backend`,
the one hook httpcore2 offers); `reads_bounded` says whether that worked, and a test checks it, so a
change of the library's internals cannot silently turn the read bounds off.
"""

from __future__ import annotations

import contextlib
import ssl
import threading
from collections.abc import Iterable, Iterator
from typing import Any

import httpcore2
import httpx2

from research_dispatch.core.bounds import MIN_READ_TIMEOUT_S, CallBounds, guard_chunks

POLL_S = 0.25
"""Longest single blocking read: how soon a silent socket notices an interrupt or the deadline."""

_active = threading.local()


@contextlib.contextmanager
def bounded(bounds: CallBounds, what: str) -> Iterator[None]:
    """Hold every request made on this thread inside the block to `bounds` (`what` names the call)."""
    previous = getattr(_active, "call", None)
    _active.call = (bounds, what)
    try:
        yield
    finally:
        _active.call = previous


def _current() -> tuple[CallBounds, str] | None:
    call: tuple[CallBounds, str] | None = getattr(_active, "call", None)
    return call


def _clamp(timeout: float | None, bounds: CallBounds) -> float:
    left = max(MIN_READ_TIMEOUT_S, bounds.remaining())
    return left if timeout is None else max(MIN_READ_TIMEOUT_S, min(timeout, left))


class _BoundedStream(httpcore2.NetworkStream):
    def __init__(self, inner: httpcore2.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        call = _current()
        if call is None:
            return self._inner.read(max_bytes, timeout)
        bounds, what = call
        gives_up_at = None if timeout is None else bounds.clock() + timeout
        while True:
            bounds.check(what)
            wait = min(POLL_S, _clamp(None, bounds))
            if gives_up_at is not None:
                wait = max(MIN_READ_TIMEOUT_S, min(wait, gives_up_at - bounds.clock()))
            try:
                return self._inner.read(max_bytes, wait)
            except httpcore2.ReadTimeout:
                if gives_up_at is not None and bounds.clock() >= gives_up_at:
                    raise  # the configured per-read timeout: an ordinary (retryable) timeout

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        call = _current()
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
        call = _current()
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
        call = _current()
        if call is not None:
            call[0].check(call[1])
            timeout = _clamp(timeout, call[0])
        return _BoundedStream(self._inner.connect_tcp(host, port, timeout, local_address, socket_options))

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options: Iterable[Any] | None = None) -> httpcore2.NetworkStream:
        call = _current()
        if call is not None:
            call[0].check(call[1])
            timeout = _clamp(timeout, call[0])
        return _BoundedStream(self._inner.connect_unix_socket(path, timeout, socket_options))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


class _GuardedBody(httpx2.SyncByteStream):
    def __init__(self, inner: httpx2.SyncByteStream, bounds: CallBounds, what: str) -> None:
        self._inner = inner
        self._bounds = bounds
        self._what = what

    def __iter__(self) -> Iterator[bytes]:
        yield from guard_chunks(self._inner, self._bounds, self._what)

    def close(self) -> None:
        self._inner.close()


class BoundedTransport(httpx2.BaseTransport):
    """Wraps an httpx2 transport: bounded socket I/O (when the pool lets us in) and a guarded body."""

    def __init__(self, inner: httpx2.BaseTransport) -> None:
        self._inner = inner
        pool = getattr(inner, "_pool", None)
        backend = getattr(pool, "_network_backend", None)
        self.reads_bounded = isinstance(backend, httpcore2.NetworkBackend)
        if isinstance(backend, httpcore2.NetworkBackend) and not isinstance(backend, _BoundedBackend):
            pool._network_backend = _BoundedBackend(backend)  # type: ignore[union-attr]

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        call = _current()
        if call is not None:
            call[0].check(call[1])
        response = self._inner.handle_request(request)
        if call is None:
            return response
        assert isinstance(response.stream, httpx2.SyncByteStream)
        return httpx2.Response(status_code=response.status_code, headers=response.headers,
                               stream=_GuardedBody(response.stream, *call), extensions=response.extensions)

    def close(self) -> None:
        self._inner.close()


def bounded_client(*, verify: ssl.SSLContext | bool = True, **client_options: Any) -> httpx2.Client:
    """An httpx2 client whose transports (the default one and any proxy mounted from the environment)
    are all `BoundedTransport`s."""
    client = httpx2.Client(transport=BoundedTransport(httpx2.HTTPTransport(verify=verify)), verify=verify,
                           **client_options)
    mounts = getattr(client, "_mounts", None)
    if isinstance(mounts, dict):  # proxies from HTTP(S)_PROXY: bound them too
        for pattern, transport in list(mounts.items()):
            if transport is not None and not isinstance(transport, BoundedTransport):
                mounts[pattern] = BoundedTransport(transport)
    return client
