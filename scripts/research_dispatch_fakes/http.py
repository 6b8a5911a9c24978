"""A tiny threaded HTTP server base shared by the fakes.

Each fake subclasses `FakeServer` and implements `handle(request) -> FakeResponse`. The server binds
127.0.0.1 on an ephemeral port, runs in a daemon thread and is a context manager, so tests and the
demo can start several at once without port clashes.
"""

from __future__ import annotations

import contextlib
import json
import select
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeVar
from urllib.parse import parse_qs, urlsplit


@dataclass
class FakeRequest:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]  # lower-cased names
    body: bytes

    def json(self) -> Any:
        if not self.body:
            return None
        return json.loads(self.body.decode("utf-8"))

    def param(self, name: str, default: str | None = None) -> str | None:
        values = self.query.get(name)
        return values[0] if values else default


@dataclass
class FakeResponse:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    reset_connection: bool = False  # close the socket without answering (a "connection reset")
    # A streamed body (server-sent events): written piece by piece with chunked transfer encoding; a float
    # item is a pause of that many seconds. `on_end(sent, completed)` is told how many pieces reached the
    # socket, and whether all did (False: the client hung up first).
    stream: Iterable[bytes | float] | None = None
    on_end: Callable[[int, bool], None] | None = None

    @classmethod
    def json(cls, payload: Any, status: int = 200, headers: dict[str, str] | None = None,
             delay_s: float = 0.0) -> FakeResponse:
        hdrs = {"Content-Type": "application/json"}
        hdrs.update(headers or {})
        return cls(status=status, body=json.dumps(payload).encode("utf-8"), headers=hdrs, delay_s=delay_s)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    # Headers and body go out as two small writes; without TCP_NODELAY each answer waits ~40 ms for
    # the client's delayed ACK, which would dominate every test and benchmark.
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:  # quiet: tests read the request log instead
        return

    def _dispatch(self) -> None:
        parts = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        request = FakeRequest(
            method=self.command,
            path=parts.path,
            query=parse_qs(parts.query),
            headers={k.lower(): v for k, v in self.headers.items()},
            body=body,
        )
        owner = self.server.owner
        try:
            response = owner.handle(request)
        except Exception as exc:  # a bug in a fake must be visible, not a hang
            response = FakeResponse.json({"error": {"code": 500, "message": f"fake crashed: {exc!r}"}}, 500)
        owner._record(request, response)
        if response.delay_s:
            time.sleep(response.delay_s)
        if response.reset_connection:
            with contextlib.suppress(OSError):
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            self.close_connection = True
            self.connection.close()
            return
        self.send_response(response.status)
        for name, value in response.headers.items():
            self.send_header(name, value)
        if response.stream is not None:
            self._write_stream(response)
            return
        self.send_header("Content-Length", str(len(response.body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(response.body)

    def _hung_up_within(self, seconds: float) -> bool:
        """Wait `seconds`, watching the socket: a client that closed its end (a deadline, Ctrl-C) is seen
        at once, as a real server sees the connection drop, instead of at the next write."""
        ends = time.monotonic() + seconds
        while (left := ends - time.monotonic()) > 0:
            readable, _, _ = select.select([self.connection], [], [], min(left, 0.02))
            if readable:
                try:
                    if not self.connection.recv(1, socket.MSG_PEEK):
                        return True
                except OSError:
                    return True
                time.sleep(min(left, 0.02))  # a pipelined request waiting: not a hang-up
        return False

    def _write_stream(self, response: FakeResponse) -> None:
        """The body piece by piece (chunked), flushed as it goes, as a streaming server sends events."""
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        sent, completed = 0, False
        try:
            for piece in response.stream or ():
                if isinstance(piece, float):
                    if self._hung_up_within(piece):
                        raise ConnectionResetError("the client hung up")
                    continue
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                self.wfile.flush()
                sent += 1
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
            completed = True
        except OSError:  # the client hung up mid-stream (a deadline, a size cap, Ctrl-C)
            self.close_connection = True
        finally:
            if response.on_end is not None:
                response.on_end(sent, completed)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _dispatch


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    # socketserver's default listen backlog is 5: a burst of parallel legs connecting at once would see
    # dropped SYNs and the kernel's 1 s retransmit, a stall no real service has.
    request_queue_size = 128
    owner: FakeServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hangs up mid-answer (a size cap, a deadline, Ctrl-C) is what the product is meant
        to do under those faults, not a server error worth a traceback on stderr; anything else is."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


_S = TypeVar("_S", bound="FakeServer")


class FakeServer:
    """Base class: subclass and implement `handle`."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self._server = _Server((host, port), _Handler)
        self._server.owner = self
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.requests: list[tuple[FakeRequest, FakeResponse]] = []

    # -- lifecycle -------------------------------------------------------------------------
    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def root_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> FakeServer:
        if self._thread is None:
            self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                            name=type(self).__name__, daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self._server.server_close()

    def __enter__(self: _S) -> _S:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- behaviour -------------------------------------------------------------------------
    def handle(self, request: FakeRequest) -> FakeResponse:
        raise NotImplementedError

    def _record(self, request: FakeRequest, response: FakeResponse) -> None:
        with self._lock:
            self.requests.append((request, response))

    def requests_to(self, path_suffix: str) -> list[FakeRequest]:
        with self._lock:
            return [req for req, _ in self.requests if req.path.endswith(path_suffix)]
