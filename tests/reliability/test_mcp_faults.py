"""MCP faults: a server that is missing, exits at start, hangs past `timeout_s`, answers with an error or
with 5 MB, or prints noise on its stdio channel costs one tool call, never the leg; its process is reaped.

Real server processes (tests/tools/mcp_fault_server.py, the official SDK's server) over stdio, the
product's own leg code, the real openai and tavily clients against the fakes.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.tools.conftest import exa, fault_server, live_processes, run_one_leg, tool_env  # noqa: F401 - fixtures
from tests.tools.test_mcp_leg import mcp_repo, tool_messages

pytestmark = pytest.mark.slow

DOCS_PAGE = "https://docs.diloco-project.org/diloco/overview"  # named in the brief (SCOPE_WITH_PAGE)


def case(mode: str, case: str, kind: str | None, message: str | None) -> Any:
    expect = (f"a tool error ({kind}) for that call; the leg finishes and writes its report; the server process "
              "is reaped" if kind else "the SDK skips the line; the call succeeds; the leg is ok")
    return pytest.param(mode, kind, message, id=mode,
                        marks=pytest.mark.reliability(area="search", case=f"MCP: {case}", expect=expect))


FAULTS = [
    case("missing", "server command missing", "mcp_start_failed", "command not found"),
    case("exit", "server exits at start", "mcp_start_failed", "exiting at start as asked"),
    case("hang", "server hangs past timeout_s", "mcp_timeout", "no answer within"),
    case("error", "tool answers with an error result", "mcp_error_result", "upstream refused"),
    case("huge", "tool answers with 5 MB", "mcp_too_large", "larger than"),
    case("noisy", "server prints non-JSON lines on its stdout", None, None),
]


@pytest.mark.parametrize(("mode", "kind", "message"), FAULTS)
def test_mcp_faults_are_tool_errors_and_the_leg_finishes(
        tmp_path: Path, tool_env: dict[str, str], gateway: Any,  # noqa: F811 - the fixture imported above
        mode: str, kind: str | None, message: str | None) -> None:
    marker = uuid.uuid4().hex
    argv = ["no-such-mcp-server-" + marker] if mode == "missing" else fault_server(mode, marker)
    # `timeout_s` bounds the server's start too: the hanging server gets enough of it to start on a loaded
    # machine (an interpreter importing the MCP SDK), so that what is tested is the call that hangs
    repo = mcp_repo(tmp_path, argv, ["read_page"], timeout_s=8 if mode == "hang" else 20)
    run = run_one_leg(repo, tool_env)
    assert run.meta is not None and run.body, run.result  # the leg finished and wrote its report from web sources
    assert run.meta["search"]["mcp_calls"] == 1
    # The first turn reads the brief's documentation page with web_extract too (issue 32: the brief's URLs are
    # readable at once); no fake web service holds that page, so that reading is an honest extract_failed of
    # its own, which degrades nothing. The MCP server's fault is the only other tool error.
    errors = [e for e in run.tool_events() if e["is_error"]]
    web = [e for e in errors if not e["name"].startswith("docs__")]
    assert all(e["name"] == "web_extract" and e["detail"] == {"error": "extract_failed"}
               and json.loads(e["arguments"])["urls"] == [DOCS_PAGE] for e in web), web
    mcp_errors = [e["detail"].get("error") for e in errors if e["name"].startswith("docs__")]
    if kind is None:
        assert mcp_errors == [] and run.result.status == "ok", run.result.reasons
    else:
        assert mcp_errors == [kind]
        (result,) = [t for t in tool_messages(gateway) if t.startswith('<tool_result tool="docs__read_page"')]
        assert result.startswith('<tool_result tool="docs__read_page" status="error">\nERROR: ')
        assert message in result
        if kind != "mcp_error_result":  # a server fault degrades the leg and says so; a tool's own answer does not
            assert run.result.status == "degraded"
            assert f"MCP tool errors reached the researcher ({kind}×1)" in run.result.reasons
    assert live_processes(marker) == []
