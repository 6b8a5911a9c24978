"""Import, in the main thread, everything that worker threads would otherwise import lazily.

Why: the stage modules import their heavy clients (openai, httpx/httpx2, tavily, requests, exa, mcp,
PyGithub, rich) inside functions, so that `research-dispatch --help` stays fast. In a fresh interpreter
the first legs of `run` then start those imports *at the same moment* on several threads. Python's
per-module import locks resolve the resulting lock cycles by handing one thread a partially initialised
module, and the leg fails with "partially initialized module 'httpx' has no attribute 'URL'" (issue 11:
6 of 10 fresh `run --jobs 6` lost legs). Importing the whole set once, before the first worker thread
starts, removes the race: worker threads then only ever look modules up in `sys.modules`.

The list is by package, not by the exact submodules used today, and includes the clients' own lazily
loaded parts (`openai.resources`, the HTTP library's connection and protocol modules, which load on
the first request). `tests/bounds/test_fresh_interpreter.py` runs a refresh with an import hook and
fails if any module is still imported on a leg thread, so a new lazy import is caught deterministically
rather than by a flaky race.
"""

from __future__ import annotations

import importlib

GATEWAY_MODULES: tuple[str, ...] = (
    # the model gateway: openai 3.x on httpx2, with its lazily imported resources and transport pieces
    "httpx", "httpx2", "httpcore2", "h11", "anyio", "sniffio", "certifi", "idna", "jiter",
    "openai", "openai.resources", "openai.resources.chat", "openai.types", "openai.types.chat",
    "openai._legacy_response", "openai._streaming", "pydantic",
    "research_dispatch.gateway.client", "research_dispatch.core.bounds", "research_dispatch.core.bounded_http",
    "research_dispatch.gateway.endpoints",
)

WORKER_MODULES: tuple[str, ...] = (
    *GATEWAY_MODULES,
    # search and documentation tools
    "requests", "urllib3", "charset_normalizer", "netrc", "tavily", "tavily.errors", "exa_py", "mcp",
    "mcp.client.session", "mcp.client.stdio", "mcp.client.streamable_http",
    # publishing (runs after the legs, but a pool may start it early) and the live display
    "github", "rich.console", "rich.live", "rich.table", "rich.box", "rich.text",
    "pydantic", "yaml",
    # the product's own stage modules the workers use
    "research_dispatch.leg.run", "research_dispatch.gateway.client", "research_dispatch.tools.search",
    "research_dispatch.leg.researcher", "research_dispatch.leg.report", "research_dispatch.gateway.route",
    "research_dispatch.leg.verify", "research_dispatch.core.sanitize", "research_dispatch.core.redact",
    "research_dispatch.core.bounds", "research_dispatch.tools.chunks", "research_dispatch.synthesis",
    "research_dispatch.tools.providers", "research_dispatch.core.search_http", "research_dispatch.tools.mcp_servers",
    "research_dispatch.core.records",
)


def import_worker_modules(names: tuple[str, ...] = WORKER_MODULES) -> list[str]:
    """Import every module in `names` (in this thread); return those that are not installed.

    A module that is not installed is skipped: an optional client the run does not use (exa, mcp)
    must not stop the run, and one it does use fails in the leg with its own clear error.
    """
    missing = []
    for name in names:
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    _warm_lazy_attributes()
    return missing


def _warm_lazy_attributes() -> None:
    """The openai client loads its resource classes on first attribute access (`client.chat`); build
    one client without a key that is ever sent, touch those attributes, and close it."""
    try:
        import openai
    except ImportError:  # pragma: no cover - openai is a hard dependency
        return
    client = openai.OpenAI(api_key="preload-not-a-key", base_url="http://127.0.0.1:9/v1", max_retries=0)
    try:
        _ = client.chat.completions
        _ = client.models
    finally:
        client.close()
