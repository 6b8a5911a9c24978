"""`python -m research_dispatch.fake serve`: all the fakes in one process, for subprocess-level tests.

The workflow end-to-end test (and anyone poking at the CLI by hand) needs the fakes running outside
the test process. This prints exactly ONE JSON line, `{"gateway": ..., "tavily": ..., "exa": ...,
"github": ...}` (the base URLs to put in OPENROUTER_BASE_URL, TAVILY_BASE_URL, EXA_BASE_URL and
GITHUB_API_URL), flushes it so a
parent reading the pipe is not left waiting, then blocks until SIGTERM or SIGINT and stops the servers
cleanly (exit status 0).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Any

from research_dispatch_fakes.exa import FakeExa
from research_dispatch_fakes.gateway import FakeGateway
from research_dispatch_fakes.github import FakeGitHub
from research_dispatch_fakes.tavily import FakeTavily


def _load_json(path: str | None, what: str) -> dict[str, Any] | None:
    if not path:
        return None
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SystemExit(f"{what}: cannot read {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise SystemExit(f"{what}: {path} must hold a JSON object")
    return data


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m research_dispatch.fake",
                                     description="Offline fakes of OpenRouter, Tavily, Exa and GitHub.")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="start all the fakes, print their URLs as one JSON line, and block")
    serve.add_argument("--gateway-scenario", metavar="FILE", help="JSON scenario for the fake gateway")
    serve.add_argument("--tavily-scenario", metavar="FILE", help="JSON scenario for the fake search server")
    serve.add_argument("--exa-scenario", metavar="FILE", help="JSON scenario for the fake Exa server")
    serve.add_argument("--github-git-dir", metavar="DIR", help="bare git repository the fake GitHub reads refs from")
    serve.add_argument("--github-repo", metavar="OWNER/NAME", default="acme/review",
                       help="repository the fake GitHub serves (default acme/review)")
    return parser


def serve(args: argparse.Namespace) -> int:
    """Run the fakes until SIGTERM/SIGINT."""
    owner, _, name = str(args.github_repo).partition("/")
    if not owner or not name or "/" in name:
        raise SystemExit(f"--github-repo: expected OWNER/NAME, got {args.github_repo!r}")
    stop = threading.Event()

    def _on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    gateway = FakeGateway(scenario=_load_json(args.gateway_scenario, "--gateway-scenario"))
    tavily = FakeTavily(scenario=_load_json(args.tavily_scenario, "--tavily-scenario"))
    exa = FakeExa(scenario=_load_json(args.exa_scenario, "--exa-scenario"))
    github = FakeGitHub(owner=owner, name=name,
                        git_dir=Path(args.github_git_dir) if args.github_git_dir else None)
    servers = [gateway, tavily, exa, github]
    try:
        for server in servers:
            server.start()
        sys.stdout.write(json.dumps({"gateway": gateway.base_url, "tavily": tavily.base_url, "exa": exa.base_url,
                                     "github": github.base_url}) + "\n")
        sys.stdout.flush()
        while not stop.wait(0.5):  # a timed wait keeps the main thread responsive to signals
            pass
    finally:
        # Stop in parallel: each shutdown waits out its serve loop's poll interval (~0.5 s).
        stoppers = [threading.Thread(target=server.stop) for server in servers]
        for thread in stoppers:
            thread.start()
        for thread in stoppers:
            thread.join(timeout=10)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "serve":
        return serve(args)
    return 2  # pragma: no cover - argparse rejects unknown commands first


if __name__ == "__main__":
    sys.exit(main())
