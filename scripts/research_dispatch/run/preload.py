"""Import, in the main thread, what the client libraries would otherwise import lazily on a worker thread.

Why: in a fresh interpreter, the first legs of `run` (and the synthesis' calls) would start the same
first imports *at the same moment* on several threads. Python's per-module import locks resolve the
resulting lock cycles by handing one thread a partially initialised module, and the leg fails with
"partially initialized module 'httpx' has no attribute 'URL'" (issue 11: 6 of 10 fresh `run --jobs 6`
lost legs). Worker threads must only ever look modules up in `sys.modules`.

The product's own modules, and the client libraries they use, are imported at the top of every stage
module, so they are loaded in the main thread before `run/pool.py` starts a worker (only `cli.py`
defers imports, for the start-up of `--help`). What is left is the libraries' *own* lazy loading: the
openai client builds its resource classes on first attribute access (`client.chat`) and parses with
`jiter` on the first response, the HTTP stacks load their connection and protocol modules on the first
request, `requests` reads `netrc` on the first call. Those are listed here by package and imported
once before the first worker starts. `tests/bounds/test_fresh_interpreter.py` runs a leg with an import
hook and fails if any module is still first imported on a leg thread, so a new lazy import is caught
deterministically rather than by a flaky race.
"""

from __future__ import annotations

import importlib

import openai

GATEWAY_MODULES: tuple[str, ...] = (
    # the model gateway: openai 3.x on httpx2, with its lazily imported resources and transport pieces
    "httpx", "httpx2", "httpcore2", "h11", "anyio", "sniffio", "certifi", "idna", "jiter",
    "openai.resources", "openai.resources.chat", "openai.types", "openai.types.chat",
    "openai._legacy_response", "openai._streaming",
)

WORKER_MODULES: tuple[str, ...] = (
    *GATEWAY_MODULES,
    # the search and documentation tools' HTTP and transport pieces
    "urllib3", "charset_normalizer", "netrc", "tavily.errors", "mcp.client.session", "mcp.client.stdio",
    "mcp.client.streamable_http",
    # the live display
    "rich.console", "rich.live", "rich.table", "rich.box", "rich.text",
)


def import_worker_modules(names: tuple[str, ...] = WORKER_MODULES) -> list[str]:
    """Import every module in `names` (in this thread); return those that are not installed.

    A module that is not installed is skipped: an optional piece the run does not use must not stop
    the run, and one it does use fails in the leg with its own clear error.
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
    client = openai.OpenAI(api_key="preload-not-a-key", base_url="http://127.0.0.1:9/v1", max_retries=0)
    try:
        _ = client.chat.completions
        _ = client.models
    finally:
        client.close()
