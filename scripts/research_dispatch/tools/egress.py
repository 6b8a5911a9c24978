"""The checking egress proxy: stdio MCP servers reach the network through it, and every hop is judged.

Why: the destination policy (`destinations.py`) checks the URLs and hosts a model passes to a tool
before the call. What the server does next happens in its own process: it follows a page's redirect to
`169.254.169.254`, or resolves a public name to `10.0.0.1`, and the answer comes back as the allowed
page. So a stdio server is started (`mcp_servers.py`) with HTTP_PROXY, HTTPS_PROXY, ALL_PROXY (both
cases) and NODE_USE_ENV_PROXY=1 naming this proxy on 127.0.0.1, and every request it makes — the first
and each redirect — is a new request here: an absolute-form `GET http://…` or a `CONNECT host:443`
tunnel. Each is judged by the same policy; the name is resolved once, here, refused when any address it
resolves to is not public (unless `allow_hosts` names the host and port), and the connection goes to
the address that was checked, so a rebinding DNS server gets no second question. A refusal is a `403`
whose body says why; the server passes it to the model as a failed fetch.

What it cannot do, and the README says so ("MCP servers"): police a server that ignores the proxy
variables (Go's `net/http` always bypasses a proxy for `localhost`; Node before 24 ignores them; raw
sockets), see inside a `CONNECT` tunnel (TLS: the host is judged, not the path), or reach a server that
runs in a container with its own network (`egress_proxy = false` for it, and the network's rules).

Bounds: headers within 64 KiB and 30 s, at most `MAX_CONNECTIONS` at once, a tunnel or response idle for
`IDLE_TIMEOUT_S` is closed, and `close()` (the leg's end) closes every connection.
"""

from __future__ import annotations

import contextlib
import socket
import socketserver
import threading
from collections.abc import Callable
from typing import Any

import ada_url

from research_dispatch.tools.destinations import DestinationPolicy

MAX_HEAD_BYTES = 64 * 1024
HEAD_TIMEOUT_S = 30.0
CONNECT_TIMEOUT_S = 10.0
IDLE_TIMEOUT_S = 120.0
MAX_CONNECTIONS = 64
MAX_RECORDED = 200
REFUSAL_MARK = "research-dispatch egress proxy: refused"  # the first words of every refusal's body
_HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-connection", "proxy-authorization", "proxy-authenticate",
                         "te", "trailer", "upgrade"})

Resolver = Callable[..., list[tuple[Any, ...]]]


class Refused(Exception):
    """A request the proxy will not carry: `status` and the line the client is shown."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason


class EgressProxy:
    """One leg's proxy on 127.0.0.1 (an ephemeral port), applying `policy` to every request through it."""

    def __init__(self, policy: DestinationPolicy, *, resolve: Resolver = socket.getaddrinfo) -> None:
        self.policy = policy
        self.resolve = resolve
        self.refused: list[str] = []  # `target: why`, in order (the leg's trace shows them)
        self.carried = 0  # requests and tunnels that were let through
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self._server = _Listener(("127.0.0.1", 0), _Handler)
        self._server.proxy = self
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.2},
                                        name="egress-proxy", daemon=True)
        self._closed = False

    def start(self) -> EgressProxy:
        self._thread.start()
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def environment(self) -> dict[str, str]:
        """The variables a server process is started with so that its HTTP clients use this proxy."""
        names = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")
        return {**{n: self.url for n in names}, **{n.lower(): self.url for n in names}, "NODE_USE_ENV_PROXY": "1"}

    def refusals_since(self, start: int) -> list[str]:
        with self._lock:
            return list(self.refused[start:])

    def close(self) -> None:
        """Stop listening and close every connection still open. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._thread.is_alive():
            self._server.shutdown()
        self._server.server_close()
        with self._lock:
            sockets = list(self._open)
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()

    # -- used by the handler threads -------------------------------------------------------------
    def track(self, sock: socket.socket) -> None:
        with self._lock:
            self._open.add(sock)

    def untrack(self, sock: socket.socket) -> None:
        with self._lock:
            self._open.discard(sock)
        with contextlib.suppress(OSError):
            sock.close()

    def record(self, target: str, why: str) -> None:
        with self._lock:
            if len(self.refused) < MAX_RECORDED:
                self.refused.append(f"{target[:300]}: {why}")

    def connect(self, host: str, port: int) -> socket.socket:
        """A connection to `host:port` through an address that was checked (the only lookup made)."""
        try:
            infos = self.resolve(host, port, 0, socket.SOCK_STREAM)
        except (OSError, UnicodeError) as exc:
            raise Refused(502, "Bad Gateway", f"cannot resolve {host}: {exc}") from None
        addresses = list(dict.fromkeys((info[0], info[4]) for info in infos))
        for _family, sockaddr in addresses:
            why = self.policy.address_refusal(host, port, str(sockaddr[0]))
            if why is not None:
                raise Refused(403, "Forbidden", why)
        last: OSError | None = None
        for family, sockaddr in addresses:
            sock = socket.socket(family, socket.SOCK_STREAM)
            sock.settimeout(CONNECT_TIMEOUT_S)
            try:
                sock.connect(sockaddr)
            except OSError as exc:
                sock.close()
                last = exc
                continue
            sock.settimeout(IDLE_TIMEOUT_S)
            return sock
        raise Refused(502, "Bad Gateway", f"cannot connect to {host}:{port}: {last or 'no address'}")


class _Listener(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    proxy: EgressProxy


class _Handler(socketserver.BaseRequestHandler):
    server: _Listener

    def handle(self) -> None:
        proxy = self.server.proxy
        client: socket.socket = self.request
        if not proxy._slots.acquire(blocking=False):
            _reply(client, Refused(503, "Service Unavailable", "too many connections through the egress proxy"))
            return
        proxy.track(client)
        try:
            self._serve(proxy, client)
        finally:
            proxy.untrack(client)
            proxy._slots.release()

    def _serve(self, proxy: EgressProxy, client: socket.socket) -> None:
        client.settimeout(HEAD_TIMEOUT_S)
        try:
            head, rest = _read_head(client)
            method, target, headers = _parse_head(head)
        except Refused as refused:
            _reply(client, refused)
            return
        except OSError:
            return
        try:
            if method == "CONNECT":
                host, port = _authority(target)
                why = proxy.policy.host_refusal(host, port)
                if why is not None:
                    raise Refused(403, "Forbidden", why)
                upstream = proxy.connect(host, port)
                client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            else:
                host, port, first = _forwarded(proxy.policy, method, target, headers)
                upstream = proxy.connect(host, port)
                upstream.sendall(first)
        except Refused as refused:
            proxy.record(target, str(refused))
            _reply(client, refused)
            return
        except OSError:
            return
        proxy.track(upstream)
        with proxy._lock:
            proxy.carried += 1
        try:
            if rest:
                upstream.sendall(rest)
            _relay(client, upstream)
        except OSError:
            pass
        finally:
            proxy.untrack(upstream)


def _read_head(sock: socket.socket) -> tuple[bytes, bytes]:
    data = b""
    while b"\r\n\r\n" not in data:
        if len(data) > MAX_HEAD_BYTES:
            raise Refused(431, "Request Header Fields Too Large", "request head over 64 KiB")
        chunk = sock.recv(65536)
        if not chunk:
            raise OSError("closed before the request head ended")
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    return head, rest


def _parse_head(head: bytes) -> tuple[str, str, list[tuple[str, str]]]:
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise Refused(400, "Bad Request", "not an HTTP/1.x request line")
    headers = []
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if not colon or not name.strip() or name != name.strip():
            raise Refused(400, "Bad Request", "a malformed header line")
        headers.append((name, value.strip()))
    return parts[0].upper(), parts[1], headers


def _authority(target: str) -> tuple[str, int]:
    """`host:port` or `[v6]:port` of a CONNECT request."""
    host, colon, port = target.rpartition(":")
    if not colon or not port.isdigit() or not 0 < int(port) < 65536 or not host:
        raise Refused(400, "Bad Request", f"CONNECT needs host:port, not {target[:100]!r}")
    return host.removeprefix("[").removesuffix("]"), int(port)


def _forwarded(policy: DestinationPolicy, method: str, target: str,
               headers: list[tuple[str, str]]) -> tuple[str, int, bytes]:
    """Where an absolute-form request goes, and its head as the origin server is sent it (origin-form,
    hop-by-hop headers dropped, `Connection: close`)."""
    why = policy.refusal(target)
    if why is None and not target.lower().startswith("http://"):
        why = "only http:// requests are forwarded (https goes through CONNECT)"
    if why is not None:
        raise Refused(403, "Forbidden", why)
    url = ada_url.parse_url(target, attributes=("hostname", "port", "pathname", "search"))
    host = str(url["hostname"]).removeprefix("[").removesuffix("]")
    port = int(str(url["port"]) or 80)
    named = {value.strip().lower() for name, value in headers if name.lower() == "connection" for value in
             value.split(",")}
    kept = [(n, v) for n, v in headers if n.lower() not in _HOP_BY_HOP and n.lower() not in named]
    lines = [f"{method} {url['pathname'] or '/'}{url['search']} HTTP/1.1", *(f"{n}: {v}" for n, v in kept),
             "Connection: close"]
    return host, port, ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _relay(client: socket.socket, upstream: socket.socket) -> None:
    """Copy both ways until the upstream side is done (or idle past `IDLE_TIMEOUT_S`), then close both:
    the request was sent with `Connection: close`, and a tunnel ends with its server."""
    client.settimeout(IDLE_TIMEOUT_S)
    forth = threading.Thread(target=_pump, args=(client, upstream), name="egress-proxy-forth", daemon=True)
    forth.start()
    _pump(upstream, client)
    for sock in (client, upstream):
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
    forth.join(CONNECT_TIMEOUT_S)


def _pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while True:
            data = source.recv(65536)
            if not data:
                break
            sink.sendall(data)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)


def _reply(sock: socket.socket, refused: Refused) -> None:
    body = f"{REFUSAL_MARK}: {refused}\n".encode("utf-8", "replace")
    head = (f"HTTP/1.1 {refused.status} {refused.reason}\r\nContent-Type: text/plain; charset=utf-8\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode("latin-1")
    with contextlib.suppress(OSError):
        sock.sendall(head + body)
