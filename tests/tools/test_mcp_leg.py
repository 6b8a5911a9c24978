"""Legs whose topic offers MCP tools: real server processes over stdio through the official SDK.

A result that names a URL becomes a citable source; every fault (server missing, exits at start, hangs
past `timeout_s`, answers with an error, answers with 5 MB) is a tool error for that call and the leg
still finishes; the server process is reaped; no key reaches a server unless listed in its `env`.
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.tools.conftest import fault_server, live_processes, make_repo, mcp_server_table, run_one_leg

pytestmark = pytest.mark.slow

SCOPE_WITH_PAGE = """\
  Survey DiLoCo and Streaming DiLoCo (see the project documentation page
  https://docs.diloco-project.org/diloco/overview) and what is production-ready for a small team today."""


def mcp_repo(tmp_path: Path, argv: list[str], tools: list[str], **kwargs: Any) -> Path:
    return make_repo(tmp_path, topic_extra="mcp: [docs]\n", scope=SCOPE_WITH_PAGE,
                     config=mcp_server_table("docs", argv, tools, **kwargs))


def tool_messages(gateway: Any) -> list[str]:
    """The tool results of the research conversation, as its last call carried them (the writing call has none)."""
    research = [c for c in gateway.completions if c["request"].get("tools")]
    return [m["content"] for m in research[-1]["request"]["messages"] if m.get("role") == "tool"]


def test_mcp_results_naming_urls_become_citable_sources(tmp_path: Path, tool_env: dict[str, str],
                                                        gateway: Any) -> None:
    marker = uuid.uuid4().hex
    repo = mcp_repo(tmp_path, fault_server("ok", marker), ["read_page", "lookup"])
    run = run_one_leg(repo, tool_env)
    assert run.result.status == "ok", run.result.reasons
    assert run.meta is not None and run.meta["search"]["mcp_calls"] == 2 and run.meta["search"]["mcp"] == ["docs"]
    offered = {t["function"]["name"] for t in gateway.completions[0]["request"]["tools"]}
    assert {"docs__read_page", "docs__lookup"} <= offered
    schema = next(t["function"]["parameters"] for t in gateway.completions[0]["request"]["tools"]
                  if t["function"]["name"] == "docs__read_page")
    assert schema["required"] == ["url"]  # the server's own schema
    results = "\n".join(tool_messages(gateway))
    # The argument URL (read_page) and the structured `url` fields (lookup) are sources with ids.
    for url in ("https://docs.diloco-project.org/diloco/overview", "https://docs.diloco-project.org/guide/diloco",
                "https://docs.diloco-project.org/guide/streaming"):
        assert re.search(rf'<source id="S\d+" url="{re.escape(url)}"', results), url
    cited = {s["url"] for s in run.meta["sources"]}
    assert cited & {"https://docs.diloco-project.org/diloco/overview", "https://docs.diloco-project.org/guide/diloco"}
    assert live_processes(marker) == []


def test_only_listed_variables_reach_a_server(tmp_path: Path, tool_env: dict[str, str], gateway: Any) -> None:
    marker = uuid.uuid4().hex
    repo = mcp_repo(tmp_path, fault_server("ok", marker), ["env_report"],
                    env={"FASTMCP_LOG_LEVEL": "ERROR", "DOCS_TOKEN": "${DOCS_TOKEN_SOURCE}"})
    env = {**tool_env, "DOCS_TOKEN_SOURCE": "docs-token-7f6e5d4c3b2a"}
    run = run_one_leg(repo, env)
    assert run.meta is not None and run.meta["search"]["mcp_calls"] == 1
    (report,) = [t for t in tool_messages(gateway) if "docs__env_report" in t]
    names = set(re.search(r'<mcp_output server="docs" tool="env_report">\n(.*?)\n</mcp_output>', report,
                          re.DOTALL).group(1).split())
    proxy = {"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy",
             "NODE_USE_ENV_PROXY"}  # the leg's egress proxy (tools/egress.py), on by default
    assert names - {"LC_CTYPE"} == {"PATH", "HOME", "FASTMCP_LOG_LEVEL", "DOCS_TOKEN"} | proxy  # LC_CTYPE: Python's
    assert not names & {"OPENROUTER_API_KEY", "TAVILY_API_KEY", "EXA_API_KEY", "DOCS_TOKEN_SOURCE", "USER"}
