"""A model that repeats itself: an HTTP proxy in front of the fake gateway that inflates its reports.

The fake gateway's scripted researcher writes a well-formed report in the word band. A real model can
loop and write the same sections over and over (issue 11 saw a 2.3 MB report). This proxy forwards
every request to the fake unchanged and, when the answer is a report (a final assistant message of
more than a few thousand characters, plain or streamed), repeats its sections until the body is
`target_bytes` long.
Everything else — headers, generation ids, provider metadata, `/generation` — is the fake's own, so
route fidelity still verifies. The inflated text is remembered and swapped back for the original in
later requests, so the fake's accounting and scripted turns see the conversation they wrote.

Standard library only, like the fakes: nothing of the product is imported.
"""

from __future__ import annotations

import http.client
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

REPORT_MIN_CHARS = 4000


class InflatingProxy:
    def __init__(self, upstream_base_url: str, target_bytes: int) -> None:
        parts = urlsplit(upstream_base_url)
        self.upstream_host, self.upstream_port = parts.hostname or "127.0.0.1", parts.port or 80
        self.prefix = parts.path.rstrip("/")  # e.g. /api/v1
        self.target_bytes = target_bytes
        self.originals: dict[str, str] = {}
        self.inflated = 0
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return None

            def do_GET(self) -> None:
                proxy._forward(self, None)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                proxy._forward(self, self.rfile.read(length))

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}{self.prefix}"

    def __enter__(self) -> InflatingProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    # ------------------------------------------------------------------------------------------
    def _deflate(self, body: bytes) -> bytes:
        try:
            data = json.loads(body)
        except ValueError:
            return body
        changed = False
        for message in data.get("messages") or [] if isinstance(data, dict) else []:
            if isinstance(message, dict) and isinstance(message.get("content"), str):
                with self._lock:
                    original = self.originals.get(message["content"])
                if original is not None:
                    message["content"] = original
                    changed = True
        return json.dumps(data).encode() if changed else body

    def _inflate(self, body: bytes) -> bytes:
        try:
            data = json.loads(body)
            message = data["choices"][0]["message"]
        except (ValueError, KeyError, IndexError, TypeError):
            return body
        content = message.get("content")
        if not isinstance(content, str) or len(content) < REPORT_MIN_CHARS or message.get("tool_calls"):
            return body
        message["content"] = self._repeat(content)
        return json.dumps(data).encode()

    def _inflate_stream(self, body: bytes) -> bytes:
        """The same for a streamed answer (server-sent events): the report's content deltas become one
        delta carrying the repeated report; every other event passes as it came."""
        blocks = body.decode("utf-8").split("\n\n")
        chunks: list[tuple[int, dict[str, Any]]] = []
        for index, block in enumerate(blocks):
            if block.startswith("data: {"):
                chunk = json.loads(block[6:])
                delta = (chunk.get("choices") or [{}])[0].get("delta") or {}
                if "content" in delta or "tool_calls" in delta:
                    chunks.append((index, chunk))
        deltas = [chunk["choices"][0]["delta"] for _, chunk in chunks]
        content = "".join(str(d.get("content") or "") for d in deltas)
        if any("tool_calls" in d for d in deltas) or len(content) < REPORT_MIN_CHARS:
            return body
        inflated = self._repeat(content)
        for position, (index, chunk) in enumerate(chunks):
            chunk["choices"][0]["delta"]["content"] = inflated if position == len(chunks) - 1 else ""
            blocks[index] = "data: " + json.dumps(chunk)
        return "\n\n".join(blocks).encode("utf-8")

    def _repeat(self, content: str) -> str:
        """The report with its sections repeated until it is `target_bytes` long (remembered, to swap back)."""
        sections = content.split("\n## ")
        head, rest = sections[0], ["## " + s for s in sections[1:]] or [content]
        parts = [head, *rest]
        size = len(content.encode())
        while size < self.target_bytes:  # the model goes round in circles: its sections again and again
            for section in rest:
                parts.append(section)
                size += len(section.encode()) + 2
        inflated = "\n\n".join(parts)
        with self._lock:
            self.originals[inflated] = content
            self.inflated += 1
        return inflated

    def _forward(self, handler: BaseHTTPRequestHandler, body: bytes | None) -> None:
        if body is not None:
            body = self._deflate(body)
        connection = http.client.HTTPConnection(self.upstream_host, self.upstream_port, timeout=120)
        headers = {k: v for k, v in handler.headers.items() if k.lower() not in ("host", "content-length")}
        if body is not None:
            headers["Content-Length"] = str(len(body))
        connection.request(handler.command, handler.path, body=body, headers=headers)
        response = connection.getresponse()
        payload = response.read()
        if handler.command == "POST" and handler.path.endswith("/chat/completions") and response.status == 200:
            streamed = (response.getheader("content-type") or "").startswith("text/event-stream")
            payload = self._inflate_stream(payload) if streamed else self._inflate(payload)
        handler.send_response(response.status)
        for key, value in response.getheaders():
            if key.lower() not in ("content-length", "transfer-encoding", "connection", "date", "server"):
                handler.send_header(key, value)
        handler.send_header("Content-Length", str(len(payload)))
        handler.end_headers()
        handler.wfile.write(payload)
        connection.close()
