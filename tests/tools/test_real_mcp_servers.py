"""Independent, real MCP servers from PyPI (the `[dev]` extra installs them) driven by the product.

* `mcp-server-fetch` (the reference fetch server) over stdio, fetching pages from a local page server
  on 127.0.0.1 (`--allow-private-ips`, since it refuses loopback addresses otherwise;
  `--ignore-robots-txt`). Its page simplifier may install an npm package on first use and print to its
  stdio channel while doing so: the leg must survive that.
* `awslabs.aws-documentation-mcp-server` starts and lists its tools (no network needed for that).
"""

from __future__ import annotations

import json
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from research_dispatch.config.settings import McpServerSettings
from research_dispatch.core.bounds import CallBounds
from research_dispatch.tools.mcp_servers import McpError, McpToolset
from tests.tools.conftest import fault_server, live_processes, local_server, make_repo, mcp_server_table, run_one_leg

pytestmark = pytest.mark.slow

BIN = Path(sys.executable).parent
AWS_FIXTURE = Path(__file__).resolve().parents[1] / "data" / "mcp" / "aws-documentation-mcp-server.tools.json"
PAGES = {
    "/diloco-notes.html": ("DiLoCo operations notes",
                           "DiLoCo runs eight workers that each take 500 inner AdamW steps before one outer "
                           "Nesterov step. The team measured a 500x cut in cross-datacentre traffic. "
                           "Checkpoints are written every outer step so a lost worker costs little."),
    "/streaming-notes.html": ("Streaming DiLoCo field report",
                              "Streaming DiLoCo overlaps the outer synchronisation with compute and sends "
                              "fragments of the model in turn. Peak bandwidth fell by another order of "
                              "magnitude in the field report, at no measurable loss in quality."),
}


class _Pages(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        page = PAGES.get(self.path)
        if page is None:
            self.send_error(404)
            return
        title, text = page
        body = (f"<html><head><title>{title}</title></head><body><article><h1>{title}</h1>"
                + "".join(f"<p>{sentence}.</p>" for sentence in text.split(". ")) + "</article></body></html>")
        data = body.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        return


@pytest.fixture
def page_server() -> Iterator[str]:
    with local_server(_Pages) as base:
        yield base


@pytest.mark.usefixtures("fetch_server_simplifier")
def test_leg_reads_local_pages_through_the_reference_fetch_server(tmp_path: Path, tool_env: dict[str, str],
                                                                  gateway: Any, page_server: str) -> None:
    urls = [page_server + path for path in PAGES]
    scope = (f"  Survey DiLoCo and Streaming DiLoCo. Read the team's notes at {urls[0]} and {urls[1]},\n"
             "  and say what is production-ready for a small team today.")
    # timeout_s is generous: on first use the fetch server's simplifier may install an npm package.
    config = mcp_server_table("fetch", [str(BIN / "mcp-server-fetch"), "--ignore-robots-txt", "--allow-private-ips"],
                              ["fetch"], timeout_s=240)
    # the page server is on loopback, which the destination policy refuses unless the config allows it (and its port);
    # the fetch server reaches it through the leg's egress proxy
    config += f'\n[tool.research-dispatch.destinations]\nallow_hosts = ["{page_server.removeprefix("http://")}"]\n'
    repo = make_repo(tmp_path, topic_extra="mcp: [fetch]\n", scope=scope, config=config)
    run = run_one_leg(repo, tool_env)
    assert run.meta is not None, run.result
    assert run.meta["search"]["mcp_calls"] == 2, run.trace
    assert run.tool_errors() == [], run.tool_events()
    assert run.result.status == "ok", run.result.reasons
    cited = {s["url"] for s in run.meta["sources"]}
    assert set(urls) <= cited  # the fetched pages are cited sources of the report
    research = [c for c in gateway.completions if c["request"].get("tools")][-1]  # not the writing call
    shown = "\n".join(m["content"] for m in research["request"]["messages"] if m["role"] == "tool")
    assert "500x cut in cross-datacentre traffic" in shown and "Peak bandwidth fell" in shown  # the pages' text


def test_aws_documentation_server_starts_and_lists_its_tools() -> None:
    settings = McpServerSettings(command=(str(BIN / "awslabs.aws-documentation-mcp-server"),),
                                 env={"FASTMCP_LOG_LEVEL": "ERROR"},
                                 tools=("search_documentation", "read_documentation", "recommend"), timeout_s=120)
    with McpToolset({"aws-docs": settings}, env={}) as toolset:
        tools = {tool.exposed: tool for tool in toolset.open()}
        assert toolset.start_problems == {}
        assert set(tools) == {"aws-docs__search_documentation", "aws-docs__read_documentation",
                              "aws-docs__recommend"}
        read = tools["aws-docs__read_documentation"]
        assert read.listed and "url" in read.schema["properties"] and "url" in read.schema["required"]
        assert read.openai_schema()["function"]["name"] == "aws-docs__read_documentation"
        # tests/data/mcp holds these schemas (the Gemini conversion is tested on them): still what it lists
        captured = {t["name"]: t for t in json.loads(AWS_FIXTURE.read_text(encoding="utf-8"))["tools"]}
        for tool in tools.values():
            assert (tool.description, tool.schema) == (captured[tool.name]["description"],
                                                       captured[tool.name]["inputSchema"]), tool.name


def test_an_unlisted_allowed_tool_is_reported_not_offered() -> None:
    settings = McpServerSettings(command=tuple(fault_server("ok", uuid.uuid4().hex)), tools=("read_page", "nope"))
    with McpToolset({"docs": settings}, env={}) as toolset:
        assert [t.exposed for t in toolset.open()] == ["docs__read_page"]
        assert "lists no tool 'nope'" in toolset.start_problems["docs"]


def test_interrupt_stops_a_hung_call_at_once_and_reaps_the_server() -> None:
    marker = uuid.uuid4().hex
    interrupt = threading.Event()
    settings = McpServerSettings(command=tuple(fault_server("hang", marker)), tools=("read_page",), timeout_s=300)
    with McpToolset({"docs": settings}, env={}, interrupt=interrupt) as toolset:
        toolset.open()
        threading.Timer(1.0, interrupt.set).start()
        started = time.monotonic()
        with pytest.raises(McpError) as raised:
            toolset.call("docs__read_page", {"url": "https://x.org/"}, CallBounds.within(300, interrupt=interrupt))
        assert raised.value.kind == "interrupted"
        assert time.monotonic() - started < 120  # bounded by the SDK's shutdown, not by the 300 s timeout
    assert live_processes(marker) == []
