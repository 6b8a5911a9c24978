"""A small MCP server over stdio (the official SDK's `MCPServer`) that misbehaves on request.

Test-only: `python mcp_fault_server.py MODE` where MODE is one of
* `ok`        - `read_page(url)` answers with a page text naming the URL, `lookup(term)` answers with a
                structured list of documents (each with `url`, `title`, `context`), `env_report()` lists
                the environment variable names the process sees;
* `exit`      - exits with status 3 before answering anything (a server that dies at start);
* `hang`      - completes the handshake, then `read_page` never answers;
* `error`     - `read_page` answers with an `isError` result;
* `huge`      - `read_page` answers with 5 MB of text;
* `noisy`     - prints a non-JSON line on stdout before every answer (like a dependency installer);
* `fetch`     - `read_page(url)` fetches whatever URL it is told, from wherever it runs, and answers with
                the body: no guard of its own (the destination policy must refuse before the call).
"""

from __future__ import annotations

import os
import sys
import time
import urllib.request

MODE = sys.argv[1] if len(sys.argv) > 1 else "ok"
if MODE == "exit":
    sys.stderr.write("fault server: exiting at start as asked\n")
    sys.exit(3)

from mcp.server import MCPServer  # noqa: E402
from mcp.server.mcpserver.exceptions import ToolError  # noqa: E402

server = MCPServer("fault-server")


@server.tool(name="read_page", description="Read one web page and return its text.", structured_output=False)
async def read_page(url: str) -> str:
    if MODE == "hang":
        while True:
            time.sleep(3600)  # blocks the whole server, as a stuck synchronous handler does
    if MODE == "error":
        raise ToolError(f"upstream refused {url}")
    if MODE == "huge":
        return "x" * (5 * 1024 * 1024)
    if MODE == "fetch":
        with urllib.request.urlopen(url, timeout=10) as answer:  # fetching anything is the point
            return f"Contents of {url}:\n" + answer.read(100_000).decode("utf-8", "replace")
    if MODE == "noisy":
        sys.stdout.write("npm WARN installing a page simplifier...\n")
        sys.stdout.flush()
    return (f"Contents of {url}:\nMCP documentation page. DiLoCo workers synchronise every 500 inner steps, "
            "cutting communication by orders of magnitude. Streaming DiLoCo overlaps the outer sync with compute.")


@server.tool(name="lookup", description="Search the documentation index.")
async def lookup(term: str) -> dict[str, object]:
    return {"results": [
        {"url": "https://docs.diloco-project.org/guide/diloco", "title": "DiLoCo guide",
         "context": f"How {term} works: outer optimiser with Nesterov momentum over local AdamW steps."},
        {"url": "https://docs.diloco-project.org/guide/streaming", "title": "Streaming guide",
         "context": "Streaming overlaps synchronisation with compute."},
    ]}


@server.tool(name="env_report", description="List the environment variable names this server sees.")
async def env_report() -> str:
    return " ".join(sorted(os.environ))


if __name__ == "__main__":
    server.run("stdio")
