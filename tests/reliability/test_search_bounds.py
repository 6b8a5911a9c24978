"""Per-call bounds on search calls, in real processes: a slow-loris server and a never-ending body end
the call at its deadline or its size cap (bounded memory), whatever the client library's per-read
timeout would do; the run's interrupt flag ends a call at once. Tavily's extract `timeout` is clamped
to the 1–60 s the service accepts.

The child process (tests/tools/bounded_search_child.py) runs one `web_search` through the product's
toolset with the real tavily-python / exa-py client; the hostile servers (tests/tools/hostile_http.py)
run in their own processes. Times are reported by the child and bounded generously here (a loaded
machine must not fail the test); the figures go to the issue report, not into asserts.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from research_dispatch.config.settings import SearchSettings
from research_dispatch.tools.providers import TavilyProvider
from research_dispatch.tools.search import SearchTools

TOOLS = Path(__file__).resolve().parent.parent / "tools"
ROOT = TOOLS.parent.parent
MAX_RSS_MB = 400


def child(provider: str, base_url: str, timeout_s: float, interrupt_after: float = 0.0) -> dict[str, Any]:
    done = subprocess.run([sys.executable, str(TOOLS / "bounded_search_child.py"), provider, base_url, str(timeout_s),
                           str(interrupt_after)], capture_output=True, text=True, timeout=300, cwd=ROOT,
                          env={"PATH": "/usr/bin:/bin", "NO_PROXY": "127.0.0.1", "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-2000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"{provider}: {result}")  # the figures for the report (pytest -s)
    return result


@pytest.mark.slow
@pytest.mark.parametrize("provider", ["tavily", "exa"])
@pytest.mark.reliability(area="search", case="search server dribbles its body (slow loris)",
                         expect="the call ends at its whole-call deadline (not per read) as a 'timeout' tool error")
def test_slow_loris_ends_at_the_call_deadline(hostile: Any, provider: str) -> None:
    result = child(provider, hostile("slowloris"), timeout_s=2.0)
    assert result["error"] == "timeout", result
    assert result["seconds"] < 60  # 2 s deadline; generous for a loaded machine (a per-read timeout: ~1000 s)
    assert result["peak_rss_mb"] < MAX_RSS_MB


@pytest.mark.slow
@pytest.mark.parametrize("provider", ["tavily", "exa"])
@pytest.mark.reliability(area="search", case="search server trickles its status line and headers, a byte a second",
                         expect="the call ends at its whole-call deadline as a 'timeout' tool error: every socket "
                                "read of the response is bounded, not only the body's")
def test_trickled_headers_end_at_the_call_deadline(hostile: Any, provider: str) -> None:
    result = child(provider, hostile("trickle"), timeout_s=2.0)
    assert result["error"] == "timeout", result
    assert result["seconds"] < 60  # 2 s deadline; a per-read timeout alone: ~100,000 s


@pytest.mark.slow
@pytest.mark.parametrize("provider", ["tavily", "exa"])
@pytest.mark.reliability(area="search", case="search server sends a body that never ends",
                         expect="reading stops at the size cap: a 'response_too_large' tool error; peak RSS < 400 MB")
def test_endless_body_stops_at_the_size_cap(hostile: Any, provider: str) -> None:
    result = child(provider, hostile("endless"), timeout_s=60.0)
    assert result["error"] == "response_too_large", result
    assert result["peak_rss_mb"] < MAX_RSS_MB


@pytest.mark.slow
@pytest.mark.reliability(area="search", case="Ctrl-C during a slow search call",
                         expect="the call ends at once as an 'interrupted' tool error; search is refused after it")
def test_interrupt_ends_a_search_call(hostile: Any) -> None:
    result = child("tavily", hostile("slowloris"), timeout_s=120.0, interrupt_after=1.0)
    assert result["error"] == "interrupted", result
    assert result["seconds"] < 60


def test_tavily_extract_timeout_is_clamped_to_what_tavily_accepts(tavily: Any) -> None:
    tools = SearchTools(providers=[TavilyProvider(api_key="tvly-test-000000", base_url=tavily.base_url)],
                        settings=SearchSettings(), timeout_s=200.0)
    tools.call("web_search", json.dumps({"query": "DiLoCo"}))
    url = tools.registry.all()[0].url
    assert not tools.call("web_extract", json.dumps({"urls": [url]})).is_error
    (extract,) = [body for endpoint, body in tavily.calls if endpoint == "extract"]
    assert extract["timeout"] == 60.0
