"""Helpers for the toolset tests: one leg run through the product's own leg code (`run_leg`) with the
real `openai`, `tavily-python` and `exa-py` clients against the fakes over HTTP, and real MCP server
processes over stdio."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import readabilipy.simple_json
import yaml

from research_dispatch.config.plan import plan_legs
from research_dispatch.config.settings import load_settings
from research_dispatch.config.topics import load_topics
from research_dispatch.leg.execute import run_leg
from research_dispatch.leg.status import LegResult
from research_dispatch_fakes.exa import FakeExa
from tests.conftest import CANARY

HERE = Path(__file__).resolve().parent
FAULT_SERVER = HERE / "mcp_fault_server.py"
EXA_KEY = "exa-canary-5e4d3c2b1a0f9e8d"
TOPIC = """\
id: diloco-family
title: DiLoCo family and decentralised training substrates
scope: |
{scope}
models:
  - model: deepseek/deepseek-v4-pro
    rationale: Strong on distributed-systems and pretraining literature
"""
SCOPE = """\
  Survey DiLoCo, Streaming DiLoCo and the decentralised training stacks built on such ideas, in
  particular PRIME-RL and the INTELLECT-2 run. Answer how much communication each method saves and at
  what quality cost, and what is production-ready for a small team today."""


@contextlib.contextmanager
def local_server(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """An HTTP server on 127.0.0.1 (an ephemeral port) in a thread: its base URL, shut down on exit."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="session")
def fetch_server_simplifier() -> bool:
    """Install, once and outside any leg, the npm package that `mcp-server-fetch`'s page simplifier
    (readabilipy) installs on first use. In a leg the server runs behind the egress proxy, which refuses
    a package registry that this workplace resolves to a documentation-range address (as it should: not
    a public address), so the first use must not happen there. True when Node is available."""
    return bool(readabilipy.simple_json.have_node())


@pytest.fixture
def exa() -> Iterator[FakeExa]:
    with FakeExa() as server:
        yield server


@pytest.fixture
def tool_env(monkeypatch: pytest.MonkeyPatch, gateway: Any, tavily: Any, exa: FakeExa) -> dict[str, str]:
    env = {"OPENROUTER_API_KEY": CANARY["OPENROUTER_API_KEY"], "TAVILY_API_KEY": CANARY["TAVILY_API_KEY"],
           "EXA_API_KEY": EXA_KEY, "OPENROUTER_BASE_URL": gateway.base_url, "TAVILY_BASE_URL": tavily.base_url,
           "EXA_BASE_URL": exa.base_url}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return env


def make_repo(root: Path, *, topic_extra: str = "", scope: str = SCOPE, config: str = "") -> Path:
    (root / "topics").mkdir(parents=True)
    (root / "topics" / "02-diloco-family.yaml").write_text(TOPIC.format(scope=scope) + topic_extra, encoding="utf-8")
    (root / "pyproject.toml").write_text(
        "[tool.research-dispatch]\n"
        "gateway = {backoff_base_s = 0.0, backoff_max_s = 0.0}\n"
        "search_service = {backoff_base_s = 0.0, backoff_max_s = 0.0}\n" + config, encoding="utf-8")
    return root


def mcp_server_table(name: str, argv: list[str], tools: list[str], *, timeout_s: float = 20,
                     env: dict[str, str] | None = None, extra: str = "") -> str:
    env_items = ", ".join(f"{k} = {json.dumps(v)}" for k, v in (env or {}).items())
    return (f"\n[tool.research-dispatch.mcp.servers.{name}]\n"
            f"command = {json.dumps(argv)}\n"
            f"tools = {json.dumps(tools)}\n"
            f"timeout_s = {timeout_s}\n" + (f"env = {{{env_items}}}\n" if env_items else "") + extra)


def fault_server(mode: str, marker: str) -> list[str]:
    """argv of the test MCP server; `marker` makes its processes findable in /proc."""
    return [sys.executable, str(FAULT_SERVER), mode, marker]


@dataclass
class LegRun:
    result: LegResult
    meta: dict[str, Any] | None
    body: str | None
    trace: list[dict[str, Any]]

    def tool_events(self) -> list[dict[str, Any]]:
        return [e for e in self.trace if e.get("event") == "tool"]

    def tool_errors(self) -> list[str]:
        return [e["detail"].get("error") for e in self.tool_events() if e["is_error"]]


def run_one_leg(repo: Path, env: dict[str, str]) -> LegRun:
    settings = load_settings(repo)
    (leg,) = plan_legs(load_topics(repo, settings), settings)
    result = run_leg(repo, settings, leg, env=env, cycle="2026-H2")
    report = repo / "research" / f"{leg.stem}.md"
    meta = body = None
    if report.exists():
        _, front, body = report.read_text(encoding="utf-8").split("---\n", 2)
        meta = yaml.safe_load(front)
    trace = [json.loads(line) for line in (repo / "build" / "traces" / f"{leg.stem}.jsonl").read_text().splitlines()]
    return LegRun(result, meta, body, trace)


def live_processes(marker: str) -> list[int]:
    """Processes whose command line contains `marker` (to prove a server was reaped)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = next((line for line in (entry / "status").read_text().splitlines()
                          if line.startswith("State:")), "")
        except OSError:
            continue
        if marker in cmdline and "zombie" not in state:
            found.append(int(entry.name))
    return found
