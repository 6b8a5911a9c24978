"""`check` (offline), `plan` and `verify` import no client library they do not call (issue 28.5).

Why a fresh interpreter: what a command imports is a property of the process — `sys.modules` of the test
session already holds every client. Each command runs as users run it, under `python -X importtime`, and
the modules it imported are read from that trace (the same measure as the issue's). A report and its call
log are read without the search clients, MCP or `openai` because the types they need live below the
transports (`tools/sources.py`, `gateway/provenance.py`); `verify --online` and `check --online` import
the client they call, in the command that calls it.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.bounds.conftest import child_env
from tests.conftest import ROOT

pytestmark = pytest.mark.slow

#: The clients (and the HTTP stacks only they bring in) these commands never call.
CLIENTS = frozenset({"openai", "mcp", "tavily", "exa_py", "github", "httpx", "httpx2", "httpcore", "httpcore2",
                     "requests", "anyio"})
RELEASE = ROOT / "tests" / "data" / "v0.1.0"  # a repository of the first release: topics, reports, call logs
_IMPORTED = re.compile(r"^import time:\s+\d+ \|\s+\d+ \|\s*([\w.]+)$", re.M)


def imported(*argv: str, cwd: Path) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """Run `python -X importtime *argv` in a fresh interpreter; its result, and the top-level modules and
    the product's modules it loaded. Keys are set (so `check` goes all the way) and the gateway is a
    closed port on 127.0.0.1: nothing leaves the machine."""
    env = child_env({"OPENROUTER_API_KEY": "sk-or-unused", "TAVILY_API_KEY": "tvly-unused",
                     "OPENROUTER_BASE_URL": "http://127.0.0.1:9/api/v1"})
    done = subprocess.run([sys.executable, "-X", "importtime", *argv], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)
    names = _IMPORTED.findall(done.stderr)
    return done, {name.split(".")[0] for name in names} | {n for n in names if n.startswith("research_dispatch.")}


@pytest.fixture
def release(tmp_path: Path) -> Path:
    return Path(shutil.copytree(RELEASE, tmp_path / "repo"))


@pytest.mark.parametrize("command", [["check"], ["plan"], ["verify"]], ids=lambda c: c[0])
def test_offline_commands_import_no_client(release: Path, command: list[str]) -> None:
    done, modules = imported("-m", "research_dispatch", *command, "--repo", str(release), cwd=release)
    # they ran to the end: check and plan succeed; verify prints the route table (exit 3: those reports
    # predate the evidence files and their routes are what they are)
    assert done.returncode in (0, 3) and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert "research_dispatch.config.settings" in modules  # the trace was read
    assert sorted(modules & CLIENTS) == []


def test_reading_a_report_imports_no_transport(tmp_path: Path) -> None:
    code = "import research_dispatch.leg.verify, research_dispatch.leg.evidence, research_dispatch.leg.report"
    done, modules = imported("-c", code, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "research_dispatch.leg.report" in modules
    assert "research_dispatch.tools.search" not in modules and "research_dispatch.gateway.client" not in modules
    assert sorted(modules & CLIENTS) == []


def test_the_online_check_imports_the_client_it_calls(release: Path) -> None:
    """The other side, so the test above cannot pass by reading nothing: `verify --online` needs `openai`."""
    done, modules = imported("-m", "research_dispatch", "verify", "--online", "--repo", str(release), cwd=release)
    assert "openai" in modules, done.stderr[-2000:]
