"""The destination policy: a model cannot point a tool at loopback, private or metadata addresses.

Against a fake MCP server that fetches whatever URL it is told (`tests/tools/mcp_fault_server.py fetch`,
a real stdio process through the official SDK) and a "metadata" HTTP server on 127.0.0.1 that counts
every request: the scripted researcher calls the server's `read_page` with each URL of the topic's scope,
as a model talked into it by a page would. The policy itself is checked as a property over every IPv4
address in each spelling a resolver accepts.
"""

from __future__ import annotations

import ipaddress
import socket
import sys
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, ClassVar

import ada_url
import httpx
import pytest
import requests
from hypothesis import given, settings
from hypothesis import strategies as st

from research_dispatch.tools.destinations import DestinationPolicy
from research_dispatch.tools.egress import EgressProxy
from tests.profiles import examples
from tests.tools.conftest import (  # noqa: F401  (exa, fetch_server_simplifier, tool_env: the fixtures)
    exa,
    fault_server,
    fetch_server_simplifier,
    live_processes,
    local_server,
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
    with local_server(handler) as base:
        yield base, handler.hits


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


# -- destinations as clients read them (issue 31) ---------------------------------------------------------------
def urllib_host(url: str) -> str:
    """The host urllib connects to: its own split, percent-decoded (`Request.host`), port dropped."""
    return urllib.request.Request(url).host.rsplit(":", 1)[0].strip("[]").rstrip(".")


def socket_host(url: str) -> str:
    """What Python's socket layer looks up for urllib's host: a Unicode name through the `idna` codec."""
    return urllib_host(url).encode("idna").decode("ascii")


def whatwg_host(url: str) -> str:
    """The host by the WHATWG URL standard (Node's own parser; browsers and curl read alike)."""
    return str(ada_url.URL(url).hostname).strip("[]")


# Each spelling, the client whose reading connects to a non-public address, and that address. The reading
# is taken by the client's own parser here, so each row shows the spelling is real before the policy is asked.
DECODED = {
    "percent-encoded host (urllib)": ("http://%31%32%37.0.0.1:8080/x", urllib_host, "127.0.0.1"),
    "percent-encoded host (WHATWG)": ("http://%31%32%37.0.0.1:8080/x", whatwg_host, "127.0.0.1"),
    "circled digits, UTS-46 (WHATWG)": ("http://①②⑦.0.0.1/", whatwg_host, "127.0.0.1"),
    "circled digits, Python's IDNA codec (socket)": ("http://①②⑦.0.0.1/", socket_host, "127.0.0.1"),
    "full-width dots": ("http://169。254。169。254/latest/meta-data/", whatwg_host, "169.254.169.254"),
    "full-width letters": ("http://ｌｏｃａｌｈｏｓｔ:3000/", whatwg_host, "localhost"),
    "a soft hyphen in the name": ("http://local\u00adhost/", whatwg_host, "localhost"),
    "an encoded trailing dot (%2e)": ("http://127.0.0.1%2e/", whatwg_host, "127.0.0.1"),
    "a trailing dot": ("http://127.0.0.1./", whatwg_host, "127.0.0.1"),
    "a backslash read as a slash": ("http://169.254.169.254\\.x/", whatwg_host, "169.254.169.254"),
    "percent-encoded letters": ("http://%6c%6fcalhost/", whatwg_host, "localhost"),
    "hex and octal parts (WHATWG)": ("http://0xa9.0376.0xa9.0376/", whatwg_host, "169.254.169.254"),
    "IPv4-compatible IPv6 [::127.0.0.1]": ("http://[::127.0.0.1]/", whatwg_host, "::7f00:1"),
    "IPv4-mapped IPv6": ("http://[::ffff:169.254.169.254]/", whatwg_host, "::ffff:a9fe:a9fe"),
    "NAT64 [64:ff9b::a9fe:a9fe]": ("http://[64:ff9b::a9fe:a9fe]/", whatwg_host, "64:ff9b::a9fe:a9fe"),
    "local-use NAT64 64:ff9b:1::/48": ("http://[64:ff9b:1::a9fe:a9fe]/", whatwg_host, "64:ff9b:1::a9fe:a9fe"),
    "6to4 [2002:a9fe:a9fe::]": ("http://[2002:a9fe:a9fe::]/", whatwg_host, "2002:a9fe:a9fe::"),
    "Teredo": ("http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/", whatwg_host, "2001:0:4136:e378:8000:63bf:3fff:fdd2"),
    "IPv4-translated ::ffff:0:a.b.c.d": ("http://[::ffff:0:7f00:1]/", whatwg_host, "::ffff:0:7f00:1"),
    "a Kubernetes service name (.svc)": ("http://kubernetes.default.svc/", whatwg_host, "kubernetes.default.svc"),
    "a Consul name (.consul)": ("http://vault.service.consul:8200/", whatwg_host, "vault.service.consul"),
    "a .localdomain name": ("http://db.localdomain/", whatwg_host, "db.localdomain"),
    "a .home name": ("http://router.home/", whatwg_host, "router.home"),
    "a .private name": ("http://wiki.private/", whatwg_host, "wiki.private"),
}


@reliability(area="hostile", case="a URL whose host a client decodes to a non-public one: {id}",
             expect="the client's own parser is shown to read the non-public host; the destination policy refuses "
                    "the URL before any call")
@pytest.mark.parametrize(("url", "reading", "host"), list(DECODED.values()), ids=list(DECODED))
def test_a_host_is_judged_as_clients_read_it(url: str, reading: Any, host: str) -> None:
    assert reading(url) == host  # the spelling is real: this client connects there
    assert DestinationPolicy().refusal(url) is not None, url


EVERY_HOST = {"file:": "file://127.0.0.1/etc/passwd", "gopher:": "gopher://docs.example.org:70/_x",
              "dict:": "dict://docs.example.org:11211/stats", "ftp:": "ftp://docs.example.org/x",
              "user-info": "http://user:pw@docs.example.org/", "user-info through a backslash":
                  "http://docs.example.org\\@169.254.169.254/"}


@reliability(area="hostile", case="a host the config allows, reached by another scheme or with user-info: {id}",
             expect="refused: `allow_hosts` lets a host and port through for http(s) only, never a scheme or a "
                    "user name")
@pytest.mark.parametrize("url", list(EVERY_HOST.values()), ids=list(EVERY_HOST))
def test_allow_hosts_never_skips_the_scheme_or_user_info(url: str) -> None:
    policy = DestinationPolicy.allowing(["docs.example.org", "127.0.0.1", "169.254.169.254:80"])
    assert policy.refusal(url) is not None
    assert policy.refusal("http://docs.example.org/x") is None


@reliability(area="hostile", case="`allow_hosts = [\"127.0.0.1:8080\", \"docs.internal\"]`: another port of an "
                                  "allowed host",
             expect="`host:port` allows that port only and `host` ports 80 and 443 only; 127.0.0.1:9090, "
                    "docs.internal:8080 are refused, 127.0.0.1:8080 and docs.internal are allowed (in any spelling of "
                    "the same address)")
def test_allowed_hosts_are_matched_with_their_port() -> None:
    policy = DestinationPolicy.allowing(["127.0.0.1:8080", "docs.internal"])
    for url in ("http://127.0.0.1:8080/x", "http://127.1:8080/", "http://docs.internal/", "https://docs.internal/"):
        assert policy.refusal(url) is None, url
    for url in ("http://127.0.0.1:9090/", "http://127.0.0.1/", "http://docs.internal:8080/", "http://localhost:8080/"):
        assert policy.refusal(url) is not None, url


def nested(value: Any, depth: int) -> Any:
    for level in range(depth):
        value = {"payload": [value]} if level % 2 else [value]
    return value


ARGUMENTS = {"a host under host": {"host": "169.254.169.254"},
             "a host 60 levels deep": nested({"target": "10.0.0.1"}, 60),
             "a URL 60 levels deep under no URL key": nested({"x": "http://169.254.169.254/"}, 60),
             "host:port under server": {"server": "localhost:8080"},
             "an integer address under ip": {"ip": "2130706433"},
             "a mapped IPv6 address under any key": {"q": "::ffff:169.254.169.254"},
             "a dotted address under any key": {"note": "10.1.2.3"},
             "a local name under endpoint": {"endpoint": "kubernetes.default.svc"},
             "camelCase baseUrl": {"baseUrl": "10.0.0.1/api"},
             "a URL as a key": {"http://169.254.169.254/latest/": "x"},
             "a URL inside free text": {"prompt": "summarise http://127.0.0.1:8080/admin for me"}}


@reliability(area="hostile", case="an MCP call's arguments name a non-public host: {id}",
             expect="every string at any depth (keys too) that parses as a URL or host is judged; the call is "
                    "refused before it is sent")
@pytest.mark.parametrize("arguments", list(ARGUMENTS.values()), ids=list(ARGUMENTS))
def test_every_string_of_a_call_is_looked_at(arguments: Any) -> None:
    assert DestinationPolicy().refusals(arguments) != []


def test_numbers_phrases_and_paths_are_not_hosts() -> None:
    """What is no host passes: versions, decimals, times, search phrases, file paths, public names."""
    assert DestinationPolicy().refusals({"version": "0.1.0", "threshold": "0.5", "v": "v3.12", "time": "12:30",
                                         "query": "what is 10.0.0.0/8 used for", "path": "docs/index.md",
                                         "domain": "arxiv.org", "limit": 3, "flag": True, "none": None}) == []


def socket_get(host: str, port: int, path: str) -> str:
    """A GET over Python's own socket layer, which maps a Unicode host with its IDNA codec."""
    with socket.create_connection((host, port), timeout=5) as sock:
        sock.sendall(f"GET {path} HTTP/1.0\r\nHost: x\r\n\r\n".encode())
        return b"".join(iter(lambda: sock.recv(65536), b"")).decode()


@reliability(area="hostile", case="real clients given decoded spellings of a loopback server's address: urllib and "
                                  "requests a percent-encoded host, httpx ideographic full stops, Python's socket "
                                  "layer circled digits",
             expect="each client really connects to the loopback server (the spellings are live), and the policy "
                    "refuses each URL")
def test_decoded_spellings_really_connect(metadata_server: tuple[str, list[str]]) -> None:
    base, hits = metadata_server
    port = int(base.rsplit(":", 1)[1])
    percent = f"http://%31%32%37.0.0.1:{port}"
    with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(f"{percent}/urllib", timeout=5) as answer:
        assert SECRET in answer.read().decode()
    session = requests.Session()
    session.trust_env = False  # no proxy from the environment: each client's own connection
    assert SECRET in session.get(f"{percent}/requests", timeout=5).text
    full_stops = f"http://127。0。0。1:{port}"
    assert SECRET in httpx.get(f"{full_stops}/httpx", timeout=5, trust_env=False).text
    assert SECRET in socket_get("①②⑦.0.0.1", port, "/socket")
    assert hits == ["/urllib", "/requests", "/httpx", "/socket"]
    for url in (percent, full_stops, f"http://①②⑦.0.0.1:{port}"):
        assert DestinationPolicy().refusal(f"{url}/x") is not None, url


@settings(max_examples=examples(300), deadline=None)
@given(st.integers(min_value=0, max_value=2**32 - 1))
def test_every_ipv6_and_unicode_form_of_an_ipv4_address_is_judged_by_it(value: int) -> None:
    """IPv4-mapped, -compatible and -translated, NAT64 and 6to4 forms, full-width digits and a trailing dot
    are refused exactly when the IPv4 address is not public; a percent-encoded host always is (clients
    decode it differently)."""
    address = ipaddress.IPv4Address(value)
    high, low = value >> 16, value & 0xFFFF
    forms = [f"[::ffff:{address}]", f"[::ffff:0:{address}]", f"[64:ff9b::{address}]", f"[2002:{high:x}:{low:x}::1]",
             str(address).translate({ord(d): 0xFF10 + int(d) for d in "0123456789"}), f"{address}."]
    if value >> 24:  # ::/96 spelled ::a.b.c.d is `::` and `::1` for the first addresses, judged as themselves
        forms.append(f"[::{address}]")
    for form in forms:
        refused = DestinationPolicy().refusal(f"http://{form}/x") is not None
        assert refused is (not address.is_global), (form, address)
    encoded = "".join(f"%{ord(ch):02x}" for ch in str(address))
    assert DestinationPolicy().refusal(f"http://{encoded}/x") is not None


# -- the checking egress proxy (tools/egress.py) -----------------------------------------------------------------
class _Redirecting(BaseHTTPRequestHandler):
    """A hostile page server: `/notes.html` answers 302 to wherever `target` says."""

    target: ClassVar[str] = ""

    def do_GET(self) -> None:
        if self.path == "/ok.html":
            body = b"<html><head><title>Notes</title></head><body><p>DiLoCo notes.</p></body></html>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        self.send_response(302)
        self.send_header("Location", type(self).target)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        return


@pytest.fixture
def hostile_pages(metadata_server: tuple[str, list[str]]) -> Iterator[str]:
    metadata, _ = metadata_server
    handler = type("Redirecting", (_Redirecting,), {"target": f"{metadata}/latest/meta-data/iam/credentials"})
    with local_server(handler) as base:
        yield base


@pytest.fixture
def proxy_for(hostile_pages: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """`proxy_for(resolve=…)`: an egress proxy allowing the hostile page server (its host and port) only.
    The suite's NO_PROXY (the fakes are reached directly) is lifted, as it is for an MCP server."""
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    proxies: list[EgressProxy] = []

    def make(**kwargs: Any) -> EgressProxy:
        allowed = [hostile_pages.removeprefix("http://"), "pages.example.org:" + hostile_pages.rsplit(":", 1)[1]]
        proxies.append(EgressProxy(DestinationPolicy.allowing(allowed), **kwargs).start())
        return proxies[-1]

    yield make
    for proxy in proxies:
        proxy.close()


def through(proxy: EgressProxy) -> urllib.request.OpenerDirector:
    return urllib.request.build_opener(urllib.request.ProxyHandler({"http": proxy.url, "https": proxy.url}))


def raw(proxy: EgressProxy, request: bytes) -> str:
    with socket.create_connection(("127.0.0.1", int(proxy.url.rsplit(":", 1)[1])), timeout=5) as sock:
        sock.sendall(request)
        return b"".join(iter(lambda: sock.recv(65536), b"")).decode("latin-1")


@reliability(area="hostile", case="egress proxy: an allowed page answers 302 to a loopback \"metadata\" server "
                                  "(urllib following redirects through the proxy)",
             expect="the page is fetched, the redirect hop is refused with a 403 naming why; the metadata server sees "
                    "no request")
def test_the_proxy_refuses_a_redirect_hop(proxy_for: Any, hostile_pages: str,
                                          metadata_server: tuple[str, list[str]]) -> None:
    _, hits = metadata_server
    proxy = proxy_for()
    with through(proxy).open(f"{hostile_pages}/ok.html", timeout=5) as answer:
        assert b"DiLoCo notes" in answer.read()
    with pytest.raises(urllib.error.HTTPError) as refused:
        through(proxy).open(f"{hostile_pages}/notes.html", timeout=5)
    assert refused.value.code == 403 and b"127.0.0.1 is not a public address" in refused.value.read()
    assert hits == [] and proxy.carried == 2 and len(proxy.refused) == 1


@reliability(area="hostile", case="egress proxy: CONNECT to 169.254.169.254:443, to [::ffff:127.0.0.1]:443 and to "
                                  "an allowed host's other port; an absolute-form `file:` and `gopher:` request",
             expect="each is answered 403 naming why, before any name is resolved or connection made")
def test_the_proxy_refuses_tunnels_and_schemes(proxy_for: Any, hostile_pages: str) -> None:
    looked_up: list[str] = []
    proxy = proxy_for(resolve=lambda host, *args: looked_up.append(host) or [])
    other_port = "127.0.0.1:" + str(int(hostile_pages.rsplit(":", 1)[1]) + 1)
    for target in ("169.254.169.254:443", "[::ffff:127.0.0.1]:443", other_port):
        answer = raw(proxy, f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
        assert answer.startswith("HTTP/1.1 403") and "is not a public address" in answer, (target, answer)
    for url in ("file://127.0.0.1/etc/passwd", "gopher://docs.example.org/_x"):
        answer = raw(proxy, f"GET {url} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        assert answer.startswith("HTTP/1.1 403") and "scheme is not allowed" in answer, (url, answer)
    assert looked_up == [] and proxy.carried == 0


@reliability(area="hostile", case="egress proxy: a public name that resolves to 10.0.0.1, and one that resolves to "
                                  "a public and a loopback address (DNS rebinding)",
             expect="refused with a 403 naming the address it resolves to; nothing is connected to; an allowed name "
                    "is connected to at the one address that was checked (no second lookup)")
def test_the_proxy_judges_the_addresses_a_name_resolves_to(proxy_for: Any, hostile_pages: str) -> None:
    port = int(hostile_pages.rsplit(":", 1)[1])
    answers = {"docs.example.org": ["10.0.0.1"], "rebind.example.org": ["93.184.216.34", "127.0.0.1"],
               "pages.example.org": ["127.0.0.1"]}
    looked_up: list[str] = []

    def resolve(host: str, port: int, *args: Any) -> list[tuple[Any, ...]]:
        looked_up.append(host)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port)) for a in answers[host]]

    proxy = proxy_for(resolve=resolve)
    for host in ("docs.example.org", "rebind.example.org"):
        with pytest.raises(urllib.error.HTTPError) as refused:
            through(proxy).open(f"http://{host}/x", timeout=5)
        assert refused.value.code == 403 and b"resolves to" in refused.value.read()
    with through(proxy).open(f"http://pages.example.org:{port}/ok.html", timeout=5) as answer:
        assert b"DiLoCo notes" in answer.read()
    assert looked_up == ["docs.example.org", "rebind.example.org", "pages.example.org"] and proxy.carried == 1


@pytest.mark.slow
@reliability(area="hostile", case="the real `mcp-server-fetch` (its own private-address guard off) reads an allowed "
                                  "page that answers 302 to a loopback \"metadata\" server",
             expect="behind the leg's egress proxy the redirect is refused: the metadata server sees 0 requests, the "
                    "refusal is in the trace, the page is no source and the canary is nowhere; with "
                    "`egress_proxy = false` the same leg's server follows it (1 request: the guard is what holds)")
@pytest.mark.usefixtures("fetch_server_simplifier")
@pytest.mark.parametrize("egress_proxy", [True, False], ids=["proxy", "no proxy"])
def test_the_reference_fetch_server_cannot_follow_a_redirect_to_metadata(
        tmp_path: Path, tool_env: dict[str, str], gateway: Any,  # noqa: F811
        metadata_server: tuple[str, list[str]], hostile_pages: str, egress_proxy: bool) -> None:
    _, hits = metadata_server
    page = f"{hostile_pages}/notes.html"
    scope = f"  Survey DiLoCo and Streaming DiLoCo. The team's notes are at {page}\n  and say what is production-ready."
    config = mcp_server_table("fetch", [str(Path(sys.executable).parent / "mcp-server-fetch"), "--ignore-robots-txt",
                                        "--allow-private-ips"], ["fetch"], timeout_s=120,
                              extra=f"egress_proxy = {str(egress_proxy).lower()}\n")
    config += f'\n[tool.research-dispatch.destinations]\nallow_hosts = ["{hostile_pages.removeprefix("http://")}"]\n'
    run = run_one_leg(make_repo(tmp_path, topic_extra="mcp: [fetch]\n", scope=scope, config=config), tool_env)
    if not egress_proxy:  # the control: without the proxy the server follows the redirect
        assert hits == ["/latest/meta-data/iam/credentials"]
        return
    assert hits == []
    refusals = [r for e in run.tool_events() for r in e["detail"].get("egress_refused", [])]
    assert refusals and all("127.0.0.1 is not a public address" in r for r in refusals), run.tool_events()
    assert SECRET not in tool_text(gateway) and SECRET not in (run.body or "")
    assert run.meta is not None and page not in {s["url"] for s in run.meta["sources"]}
