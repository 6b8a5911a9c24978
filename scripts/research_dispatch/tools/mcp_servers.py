"""MCP servers as research tools, through the official `mcp` SDK (2.x `Client`), for one leg.

Why this shape: the leg is synchronous and runs in a worker thread, the SDK is async (anyio). Each
leg's `McpToolset` owns one event-loop thread; each server is owned by one task on it (the SDK's
`Client` context must be entered and left by the same task), which starts the server, lists its tools
and then serves the leg's calls one at a time. The leg waits on each call with its own deadline and
watches the run's interrupt flag, so a server that never starts, hangs, crashes, answers with an error
or a huge result costs that call a typed `McpError` — never a hung or crashed leg.

Reaping: a server is stopped (the SDK's shutdown: close stdin, wait, SIGTERM then SIGKILL to its whole
process group) after a timeout, a crash, an interrupt, and always at `close()` (leg end, also when the
leg fails), and at interpreter exit for any toolset still open. A stopped server is started again on
its next call, at most `MAX_STARTS` times per leg.

Environment: a stdio server gets PATH and HOME plus exactly the variables of its `env` table (a value
`${NAME}` passes the run's `NAME` through) — nothing else, in particular no key that is not listed. The
SDK always adds a few variables of its own (USER, SHELL, ...), so the server is started through
`env -i`, which clears the environment and sets exactly ours. A server with `egress_proxy` (the default)
also gets the proxy variables of the leg's checking egress proxy (`egress.py`), started with the toolset
and closed with it: every request it makes, redirects included, is judged by the destination policy.

Output is untrusted: `McpOutput` carries the text and the URLs the result names (resource links,
embedded resources, `url` fields of structured content); `search.SearchTools` wraps, caps and cites it.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import json
import logging
import math
import os
import shutil
import tempfile
import threading
import time
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import IO, Any, TextIO, cast

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from research_dispatch.config.settings import ENV_REFERENCE_RE, McpServerSettings
from research_dispatch.core import sanitize
from research_dispatch.core.bounds import CallBounds
from research_dispatch.core.errors import DispatchError
from research_dispatch.core.redact import redact, register_secrets
from research_dispatch.tools.destinations import DestinationPolicy
from research_dispatch.tools.egress import EgressProxy

MAX_STARTS = 3  # per server and leg: a server that keeps dying is not restarted for ever
WAIT_SLICE_S = 0.1  # how often a waiting leg looks at the interrupt flag
STOP_GRACE_S = 10.0  # the SDK's shutdown is bounded (~6 s: stdin close, SIGTERM, SIGKILL); wait a little more
EXIT_GRACE_S = 2.0  # a healthy server's polite session end before the forced shutdown
STDERR_TAIL = 600
LINK_KEYS = ("url", "uri", "link", "href")
TEXT_KEYS = ("context", "snippet", "summary", "description", "content", "text", "excerpt")
MAX_LINKS = 20
GENERIC_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": True}

logging.getLogger("mcp").addHandler(logging.NullHandler())  # SDK tracebacks never reach the CLI's stderr


class McpError(DispatchError):
    """One MCP call (or start) failed. `kind` names the fault for the leg's status reasons."""

    def __init__(self, message: str, *, kind: str, server: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.server = server


@dataclass(frozen=True)
class McpTool:
    """A tool as the researcher sees it: `<server>__<tool>` with the server's own JSON schema."""

    server: str
    name: str
    description: str
    schema: dict[str, Any]
    listed: bool  # False: the server could not be listed; the schema is a placeholder

    @property
    def exposed(self) -> str:
        return f"{self.server}__{self.name}"

    def openai_schema(self) -> dict[str, Any]:
        description = self.description or f"{self.name} (MCP server {self.server})"
        if not self.listed:
            description += " [the server did not start; a call tries to start it again]"
        return {"type": "function", "function": {"name": self.exposed, "description": description[:1024],
                                                 "parameters": self.schema}}


@dataclass(frozen=True)
class McpLink:
    """A URL named by a result, with what the result says about it."""

    url: str
    title: str
    text: str


@dataclass(frozen=True)
class McpOutput:
    text: str
    links: list[McpLink]
    is_error: bool
    size: int


@dataclass
class _Call:
    tool: str
    arguments: dict[str, Any]
    timeout_s: float
    max_bytes: int
    future: concurrent.futures.Future[McpOutput] = field(default_factory=concurrent.futures.Future)
    cancel: Any = None  # the anyio CancelScope of the call, once it runs


def server_environment(settings: McpServerSettings, env: Mapping[str, str]) -> dict[str, str]:
    """PATH and HOME of this process, plus the server's `env` table (`${NAME}` taken from `env`)."""
    result = {name: os.environ[name] for name in ("PATH", "HOME") if os.environ.get(name)}
    for name, value in settings.env.items():
        reference = ENV_REFERENCE_RE.fullmatch(value)
        if reference is not None:
            source = reference.group(1)
            passed = env.get(source, os.environ.get(source, ""))
            if not passed:
                raise McpError(f"environment variable {source} (passed to it as {name}) is not set",
                               kind="mcp_start_failed", server="")
            register_secrets([passed])
            result[name] = passed
        else:
            result[name] = value
    return result


class _Server:
    """One configured server during one leg: its owning task, its calls and its start history."""

    def __init__(self, name: str, settings: McpServerSettings, env: Mapping[str, str],
                 proxy_env: Mapping[str, str]) -> None:
        self.name = name
        self.settings = settings
        self.env = env
        self.proxy_env = proxy_env  # the egress proxy's variables (empty: none)
        self.starts = 0
        self.listing: dict[str, Any] | None = None  # tool name -> mcp Tool, once listed
        self.queue: asyncio.Queue[_Call | None] | None = None
        self.task: asyncio.Task[None] | None = None
        self.last_error: str | None = None
        self.starting: set[Any] = set()  # cancel scopes of runs still starting (cancelled at close)
        self._stderr: IO[str] | None = None

    # -- runs on the loop thread ---------------------------------------------------------------
    async def run(self, ready: concurrent.futures.Future[None], timeout_s: float) -> None:
        """Own the server for its whole life: start and list within `timeout_s`, then serve calls.

        One cancel scope spans the life (the SDK's `Client` opens task groups that must close inside
        the scope they were opened in); its deadline bounds the start and is lifted once listed.
        """
        queue: asyncio.Queue[_Call | None] = asyncio.Queue()
        stderr = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")  # noqa: SIM115 - closed below
        self.queue, self._stderr = queue, stderr
        life = anyio.CancelScope()
        try:
            with life:
                life.deadline = anyio.current_time() + timeout_s
                self.starting.add(life)
                async with Client(self._transport(stderr)) as client:
                    listing = await client.list_tools()
                    self.listing = {tool.name: tool for tool in listing.tools}
                    life.deadline = math.inf
                    self.starting.discard(life)
                    ready.set_result(None)
                    healthy = True
                    while healthy:
                        call = await queue.get()
                        if call is None:
                            break
                        healthy = await self._serve(client, call) and self.queue is queue
                    if self.queue is queue:
                        self.queue = None  # no new call reaches this server while it shuts down
                    # Leaving the session politely can wait on a stuck server; past this deadline the
                    # SDK's shielded shutdown (stdin closed, SIGTERM, SIGKILL to the group) takes over.
                    life.deadline = anyio.current_time() + (EXIT_GRACE_S if healthy else 0.0)
            if life.cancelled_caught and not ready.done():
                ready.set_exception(self._start_error(TimeoutError()))
        except BaseException as exc:  # every start failure is reported as one
            if not ready.done():
                ready.set_exception(self._start_error(exc))
            if isinstance(exc, asyncio.CancelledError):
                raise
        finally:
            self.starting.discard(life)
            if self.queue is queue:
                self.queue = None
            while not queue.empty():  # calls that raced the shutdown: answered, never left waiting
                pending = queue.get_nowait()
                if pending is not None and not pending.future.done():
                    pending.future.set_exception(McpError("the server stopped", kind="mcp_crashed",
                                                          server=self.name))
            if self._stderr is stderr:
                self._stderr = None
            stderr.close()

    async def _serve(self, client: Any, call: _Call) -> bool:
        keep = True
        with anyio.CancelScope() as scope:
            call.cancel = scope
            try:
                with anyio.fail_after(max(0.01, call.timeout_s)):
                    result = await client.call_tool(call.tool, call.arguments)
                call.future.set_result(_output(result, call.max_bytes, self.name))
            except McpError as exc:
                call.future.set_exception(exc)
            except TimeoutError:
                keep = False
                call.future.set_exception(McpError(
                    f"no answer within {call.timeout_s:.1f} s; the server was stopped", kind="mcp_timeout",
                    server=self.name))
            except Exception as exc:  # a crash, a closed connection, a malformed answer
                exc = _leaf(exc)  # type: ignore[assignment]
                keep = False
                detail = sanitize.one_line(redact(f"{type(exc).__name__}: {exc}"), 200)
                tail = self.stderr_tail()
                call.future.set_exception(McpError(
                    f"the server failed ({detail}){'; its stderr ends: ' + tail if tail else ''}",
                    kind="mcp_crashed", server=self.name))
        if scope.cancel_called and not call.future.done():
            keep = False
            call.future.set_exception(McpError("interrupted", kind="interrupted", server=self.name))
        return keep

    def _transport(self, stderr: IO[str]) -> Any:
        if self.settings.url is not None:
            return streamable_http_client(self.settings.url)
        command = list(self.settings.command or ())
        environment = {**server_environment(self.settings, self.env), **self.proxy_env}
        program = shutil.which(command[0], path=environment.get("PATH"))
        if program is None:
            raise McpError(f"command not found: {command[0]!r}", kind="mcp_start_failed", server=self.name)
        wrapper = shutil.which("env") or "/usr/bin/env"
        if "=" in os.path.basename(program):
            raise McpError(f"cannot run {program!r} (a '=' in the program name)", kind="mcp_start_failed",
                           server=self.name)
        assignments = [f"{key}={value}" for key, value in sorted(environment.items())]
        return stdio_client(StdioServerParameters(command=wrapper, args=["-i", *assignments, program, *command[1:]]),
                            errlog=cast(TextIO, stderr))

    def _start_error(self, exc: BaseException) -> McpError:
        exc = _leaf(exc)
        if isinstance(exc, McpError):
            return McpError(str(exc), kind=exc.kind, server=self.name)
        if isinstance(exc, TimeoutError):
            message = f"did not start within {self.settings.timeout_s:g} s"
        elif isinstance(exc, asyncio.CancelledError):
            message = "start interrupted"
        else:
            message = f"could not start ({sanitize.one_line(redact(f'{type(exc).__name__}: {exc}'), 200)})"
        tail = self.stderr_tail()
        return McpError(message + (f"; its stderr ends: {tail}" if tail else ""), kind="mcp_start_failed",
                        server=self.name)

    def stderr_tail(self) -> str:
        handle = self._stderr
        if handle is None:
            return ""
        try:
            handle.flush()
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(0, size - 4 * STDERR_TAIL))
            text = handle.read()
        except (OSError, ValueError):
            return ""
        lines = [line for line in text.splitlines() if line.strip()]
        return sanitize.one_line(redact(" | ".join(lines[-3:])), STDERR_TAIL)


def _leaf(exc: BaseException) -> BaseException:
    """The first real error inside (nested) exception groups, which anyio task groups raise."""
    while isinstance(getattr(exc, "exceptions", None), tuple) and exc.exceptions:  # type: ignore[attr-defined]
        exc = exc.exceptions[0]  # type: ignore[attr-defined]
    return exc


def _output(result: Any, max_bytes: int, server: str) -> McpOutput:
    """An SDK `CallToolResult` as text and named URLs, refusing a result over the size cap."""
    texts: list[str] = []
    links: list[McpLink] = []
    size = 0
    for block in getattr(result, "content", None) or []:
        kind = getattr(block, "type", None)
        if kind == "text":
            text = str(getattr(block, "text", "") or "")
            size += len(text.encode("utf-8", "replace"))
            texts.append(text)
        elif kind == "resource_link":
            uri = str(getattr(block, "uri", "") or "")
            title = str(getattr(block, "title", None) or getattr(block, "name", None) or "")
            description = str(getattr(block, "description", None) or "")
            size += len(uri) + len(title) + len(description)
            links.append(McpLink(uri, title, description))
        elif kind == "resource":
            resource = getattr(block, "resource", None)
            uri = str(getattr(resource, "uri", "") or "")
            text = str(getattr(resource, "text", "") or "")
            size += len(text.encode("utf-8", "replace")) + len(uri)
            links.append(McpLink(uri, "", text))
        else:  # images, audio, blobs: not text a report can cite; counted, not shown
            size += len(str(getattr(block, "data", "") or getattr(block, "blob", "") or ""))
            texts.append(f"[{kind or 'unknown'} content omitted]")
        if size > max_bytes:
            break
    structured = getattr(result, "structured_content", None)
    if structured is not None:
        size += len(json.dumps(structured, default=str))
    if size > max_bytes:
        raise McpError(f"the result is larger than {max_bytes} bytes; it was not read", kind="mcp_too_large",
                       server=server)
    text = "\n".join(texts)
    if structured is None and text.lstrip().startswith(("{", "[")):
        try:
            structured = json.loads(text)
        except ValueError:
            structured = None
    links += _links_in(structured)
    web = [link for link in links if link.url.lower().startswith(("https://", "http://"))]
    return McpOutput(text=text, links=web[:MAX_LINKS], is_error=bool(getattr(result, "is_error", False)), size=size)


def _links_in(value: Any, depth: int = 0) -> list[McpLink]:
    """Objects with a URL field anywhere in structured content (bounded depth and count)."""
    if depth > 6:
        return []
    found: list[McpLink] = []
    if isinstance(value, dict):
        url = next((value[k] for k in LINK_KEYS if isinstance(value.get(k), str)), None)
        if url:
            title = str(value.get("title") or value.get("name") or "")
            text = " ".join(str(value[k]) for k in TEXT_KEYS if isinstance(value.get(k), str))
            found.append(McpLink(url.strip(), title, text))
        for item in value.values():
            if isinstance(item, dict | list):
                found += _links_in(item, depth + 1)
    elif isinstance(value, list):
        for item in value[:100]:
            found += _links_in(item, depth + 1)
    return found[:MAX_LINKS]


_OPEN: weakref.WeakSet[McpToolset] = weakref.WeakSet()


@atexit.register
def _close_open_toolsets() -> None:  # pragma: no cover - interpreter exit
    for toolset in list(_OPEN):
        toolset.close()


class McpToolset:
    """The MCP servers of one leg: start, list, call, and always stop them (`close`, or `with`)."""

    def __init__(self, servers: Mapping[str, McpServerSettings], *, env: Mapping[str, str],
                 interrupt: threading.Event | None = None, clock: Any = time.monotonic,
                 destinations: DestinationPolicy | None = None) -> None:
        proxied = any(s.command is not None and s.egress_proxy for s in servers.values())
        self.proxy = EgressProxy(destinations or DestinationPolicy()).start() if proxied else None
        proxy_env = self.proxy.environment() if self.proxy is not None else {}
        self._servers = {name: _Server(name, settings, env, proxy_env if settings.egress_proxy else {})
                         for name, settings in sorted(servers.items())}
        self._interrupt = interrupt
        self._clock = clock
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="mcp-toolset", daemon=True)
        self._thread.start()
        self._closed = False
        self._tasks: set[asyncio.Task[None]] = set()
        self.tools: dict[str, McpTool] = {}
        self.start_problems: dict[str, str] = {}
        _OPEN.add(self)

    def __enter__(self) -> McpToolset:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- starting ------------------------------------------------------------------------------
    def open(self, *, leg_deadline: float | None = None) -> list[McpTool]:
        """Start every server in parallel and list its allowed tools. A server that does not start
        still offers its allowed tools (with a placeholder schema): each call tries it again."""
        pending = {name: self._start(server, leg_deadline) for name, server in self._servers.items()}
        for name, ready in pending.items():
            server = self._servers[name]
            try:
                self._wait(ready, server.settings.timeout_s + STOP_GRACE_S)
            except McpError as exc:
                server.last_error = str(exc)
                self.start_problems[name] = str(exc)
        self.tools = {}
        for name, server in self._servers.items():
            for tool_name in server.settings.tools:
                listed = server.listing.get(tool_name) if server.listing is not None else None
                if server.listing is not None and listed is None:
                    self.start_problems.setdefault(name, f"the server lists no tool {tool_name!r}")
                    continue
                schema = dict(listed.input_schema) if listed is not None and listed.input_schema else GENERIC_SCHEMA
                tool = McpTool(server=name, name=tool_name, description=str(getattr(listed, "description", "") or ""),
                               schema=schema, listed=listed is not None)
                self.tools[tool.exposed] = tool
        return list(self.tools.values())

    def _start(self, server: _Server, leg_deadline: float | None) -> concurrent.futures.Future[None]:
        ready: concurrent.futures.Future[None] = concurrent.futures.Future()
        if server.starts >= MAX_STARTS:
            ready.set_exception(McpError(f"not started again: it failed {server.starts} times in this leg "
                                         f"({server.last_error})", kind="mcp_unavailable", server=server.name))
            return ready
        server.starts += 1
        timeout = server.settings.timeout_s
        if leg_deadline is not None:
            timeout = max(0.01, min(timeout, leg_deadline - self._clock()))

        def launch() -> None:
            server.task = self._loop.create_task(server.run(ready, timeout))
            self._tasks.add(server.task)  # every run is awaited at close, also one still shutting down

        self._loop.call_soon_threadsafe(launch)
        return ready

    # -- calling -------------------------------------------------------------------------------
    def call(self, exposed: str, arguments: dict[str, Any], bounds: CallBounds) -> McpOutput:
        """Call one tool; every failure is an `McpError` (the server is stopped when in doubt)."""
        tool = self.tools.get(exposed)
        if tool is None:
            raise McpError(f"unknown tool {exposed!r}", kind="unknown_tool", server="")
        server = self._servers[tool.server]
        if self._closed:
            raise McpError("the toolset is closed", kind="mcp_unavailable", server=server.name)
        bounds.check(f"MCP {exposed}")
        if server.queue is None:  # not running: start it again (bounded per leg)
            ready = self._start(server, bounds.deadline)
            try:
                self._wait(ready, server.settings.timeout_s + STOP_GRACE_S, bounds)
            except McpError as exc:
                server.last_error = str(exc)
                raise McpError(str(exc), kind=exc.kind, server=server.name) from None
            if server.listing is not None and tool.name not in server.listing:
                raise McpError(f"the server lists no tool {tool.name!r}", kind="mcp_error_result", server=server.name)
        queue = server.queue
        if queue is None:
            raise McpError("the server stopped", kind="mcp_crashed", server=server.name)
        call = _Call(tool=tool.name, arguments=arguments, timeout_s=max(0.01, min(server.settings.timeout_s,
                                                                                  bounds.remaining())),
                     max_bytes=min(server.settings.max_result_bytes, bounds.max_bytes))
        self._loop.call_soon_threadsafe(queue.put_nowait, call)
        try:
            output: McpOutput = self._wait(call.future, call.timeout_s + STOP_GRACE_S, bounds, call=call)
            return output
        except McpError as exc:
            if exc.kind in ("mcp_timeout", "mcp_crashed", "interrupted"):
                server.last_error = str(exc)
            raise

    def _wait(self, future: concurrent.futures.Future[Any], limit_s: float, bounds: CallBounds | None = None,
              call: _Call | None = None) -> Any:
        """Wait for the loop's answer, watching the interrupt flag and a last-resort limit."""
        give_up = self._clock() + limit_s
        while True:
            interrupted = self._interrupt is not None and self._interrupt.is_set()
            if interrupted or self._clock() >= give_up:
                if call is not None and call.cancel is not None:
                    self._loop.call_soon_threadsafe(call.cancel.cancel)
                    try:  # the call's own task stops the server; give it its bounded shutdown
                        return future.result(timeout=STOP_GRACE_S)
                    except McpError:
                        pass
                    except concurrent.futures.TimeoutError:
                        pass
                raise McpError("interrupted" if interrupted else f"no answer within {limit_s:.1f} s",
                               kind="interrupted" if interrupted else "mcp_timeout", server="")
            try:
                return future.result(timeout=WAIT_SLICE_S)
            except concurrent.futures.TimeoutError:
                continue

    # -- stopping ------------------------------------------------------------------------------
    def close(self) -> None:
        """Stop every server (reaping its process) and the loop thread. Idempotent."""
        if self._closed:
            return
        self._closed = True
        _OPEN.discard(self)

        def stop_all() -> None:
            # Through anyio, never `Task.cancel()`: a native cancel can cut the SDK's shielded shutdown
            # short and leave the server process running.
            for server in self._servers.values():
                if server.queue is not None:
                    server.queue.put_nowait(None)
                for life in list(server.starting):
                    life.cancel()

        if self._loop.is_running():
            self._loop.call_soon_threadsafe(stop_all)
            gathered = asyncio.run_coroutine_threadsafe(_settle(self._tasks), self._loop)
            with contextlib.suppress(Exception):  # a late or failed shutdown: stop the loop anyway
                gathered.result(timeout=STOP_GRACE_S * 2)
            self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=STOP_GRACE_S)
        if not self._thread.is_alive():
            self._loop.close()
        if self.proxy is not None:  # after the servers: nothing is left to use it
            self.proxy.close()

    def server_names(self) -> list[str]:
        return list(self._servers)

    def timeout_of(self, server: str) -> float:
        return self._servers[server].settings.timeout_s


async def _settle(tasks: set[asyncio.Task[None]]) -> None:
    await asyncio.gather(*list(tasks), return_exceptions=True)
