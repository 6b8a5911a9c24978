"""The destination policy: a model cannot point a tool at loopback, private or metadata addresses.

Against a fake MCP server that fetches whatever URL it is told (`tests/tools/mcp_fault_server.py fetch`,
a real stdio process through the official SDK) and a "metadata" HTTP server on 127.0.0.1 that counts
every request: the scripted researcher calls the server's `read_page` with each URL of the topic's scope,
as a model talked into it by a page would. The policy itself is checked as a property over every IPv4
address in each spelling a resolver accepts.
"""

from __future__ import annotations

import ipaddress
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from research_dispatch.tools.destinations import DestinationPolicy
from tests.profiles import examples
from tests.tools.conftest import (  # noqa: F401  (exa, tool_env: the fixtures)
    exa,
    fault_server,
    live_processes,
    make_repo,
    mcp_server_table,
    run_one_leg,
    tool_env,
)

reliability = pytest.mark.reliability
SECRET = "AKIA-metadata-canary-3f2e1d"  # what the metadata server would hand out


class _Metadata(BaseHTTPRequestHandler):
    hits: ClassVar[list[str]] = []  # each test's server gets its own list (see metadata_server)

    def do_GET(self) -> None:
        type(self).hits.append(self.path)
        body = f"AccessKeyId: {SECRET}\n".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        return


@pytest.fixture
def metadata_server() -> Iterator[tuple[str, list[str]]]:
    handler = type("Metadata", (_Metadata,), {"hits": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler.hits
    finally:
        server.shutdown()
        server.server_close()


def fetching_repo(tmp_path: Path, base: str, marker: str, *, allow: str = "") -> Path:
    scope = (f"  Survey DiLoCo and Streaming DiLoCo. The team's notes are at {base}/latest/meta-data/iam/credentials\n"
             "  and http://169.254.169.254/latest/meta-data/ and say what is production-ready today.")
    config = mcp_server_table("web", fault_server("fetch", marker), ["read_page"])
    if allow:
        config += f'\n[tool.research-dispatch.destinations]\nallow_hosts = ["{allow}"]\n'
    return make_repo(tmp_path, topic_extra="mcp: [web]\n", scope=scope, config=config)


def tool_text(gateway: Any) -> str:
    return "\n".join(m["content"] for c in gateway.completions for m in c["request"]["messages"]
                     if m.get("role") == "tool")


@pytest.mark.slow
@reliability(area="hostile", case="a model asks an MCP server that fetches anything for a loopback \"metadata\" URL "
                                  "and for 169.254.169.254",
             expect="both calls are refused before they are sent (the metadata server sees no request), the model "
                    "is told why, neither URL becomes a source, the leg still finishes with its report")
def test_a_model_chosen_metadata_url_is_never_fetched(tmp_path: Path, tool_env: dict[str, str],  # noqa: F811
                                                      gateway: Any, metadata_server: tuple[str, list[str]]) -> None:
    base, hits = metadata_server
    marker = uuid.uuid4().hex
    run = run_one_leg(fetching_repo(tmp_path, base, marker), tool_env)
    assert hits == []  # nothing reached the metadata server
    assert run.tool_errors().count("destination_refused") == 2, run.tool_events()
    text = tool_text(gateway)
    assert "refused before the call" in text and "is not a public address" in text and SECRET not in text
    assert run.meta is not None and run.body is not None, run.result
    cited = {s["url"] for s in run.meta["sources"]}
    assert not [u for u in cited if "127.0.0.1" in u or "169.254" in u], cited
    assert SECRET not in run.body and live_processes(marker) == []


@pytest.mark.slow
@reliability(area="hostile", case="the same leg with `[tool.research-dispatch.destinations] allow_hosts = "
                                  "[\"127.0.0.1:<port>\"]` (an internal page server the config allows, with its port)",
             expect="the allowed host and port is fetched through the egress proxy and can be cited; 169.254.169.254 "
                    "is still refused")
def test_a_host_the_config_allows_is_fetched(tmp_path: Path, tool_env: dict[str, str],  # noqa: F811
                                             gateway: Any, metadata_server: tuple[str, list[str]]) -> None:
    base, hits = metadata_server
    run = run_one_leg(fetching_repo(tmp_path, base, uuid.uuid4().hex, allow=base.removeprefix("http://")), tool_env)
    assert hits == ["/latest/meta-data/iam/credentials"]
    assert run.tool_errors().count("destination_refused") == 1, run.tool_events()
    assert SECRET in tool_text(gateway)  # shown to the model, as the config asked


REFUSED = ["http://127.0.0.1:8080/x", "http://127.1/", "http://2130706433/", "http://0x7f.0.0.1/", "http://0177.0.0.1/",
           "http://[::1]/", "http://[::ffff:127.0.0.1]/", "http://169.254.169.254/latest/meta-data/",
           "http://[fd00:ec2::254]/", "http://100.100.100.200/", "http://10.1.2.3/", "http://192.168.0.1/",
           "http://0/", "http://localhost:3000/", "http://api.localhost/", "http://metadata/",
           "http://metadata.google.internal/computeMetadata/v1/", "http://printer.local/", "file:///etc/passwd",
           "gopher://example.org/", "ftp://example.org/", "data:text/html,hi", "https://example.org@10.0.0.1/",
           "//10.0.0.1/x", "not a url"]


@pytest.mark.parametrize("url", REFUSED)
def test_non_public_destinations_are_refused(url: str) -> None:
    assert DestinationPolicy().refusal(url) is not None


@pytest.mark.parametrize("url", ["https://docs.diloco-project.org/x", "http://example.org/", "https://8.8.8.8/",
                                 "HTTPS://Example.ORG./a?b=c", "https://[2606:4700::1111]/"])
def test_public_destinations_pass(url: str) -> None:
    assert DestinationPolicy().refusal(url) is None


def test_the_arguments_of_a_call_are_searched_for_urls() -> None:
    policy = DestinationPolicy()
    found = policy.refusals({"url": "localhost:8080", "search_phrase": "S3: bucket policy",
                             "pages": [{"href": "http://10.0.0.1/"}], "note": "see https://example.org/"})
    assert [line.split(":", 1)[0] for line in found] == ["localhost", "http"]
    assert policy.refusals({"search_phrase": "S3: bucket policy", "limit": 3}) == []


@settings(max_examples=examples(300), deadline=None)
@given(st.integers(min_value=0, max_value=2**32 - 1))
def test_every_spelling_of_an_ipv4_address_is_judged_by_the_address(value: int) -> None:
    """Dotted, one integer, hex, octal and shortened forms all connect to the same address (inet_aton),
    so each is refused exactly when the address is not globally reachable."""
    address = ipaddress.IPv4Address(value)
    a, b, c, d = address.packed
    spellings = [str(address), str(value), hex(value), f"{a}.{(b << 16) | (c << 8) | d}",
                 f"{a}.{b}.{(c << 8) | d}", f"0{a:o}.{b}.{c}.{d}" if a else f"0.{b}.{c}.{d}", f"{a:#x}.{b}.{c}.{d}"]
    for spelling in spellings:
        refused = DestinationPolicy().refusal(f"http://{spelling}/x") is not None
        assert refused is (not address.is_global), (spelling, address)
    assert DestinationPolicy.allowing([str(address)]).refusal(f"http://{address}/x") is None
