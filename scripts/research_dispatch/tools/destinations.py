"""Where a model may send a tool: the destination policy for every URL or host a model passes to a tool.

Why here and not in each MCP server: a model chooses the URL, and a page it read can tell it which. An
MCP `fetch` server fetches whatever it is told, from the runner's network — a cloud metadata address
(`169.254.169.254`, `metadata.google.internal`), a service on loopback, the office's private ranges —
and its answer would be shown to the model and cited as a source in a committed report. So before any
tool call, every URL and host in its arguments is checked here (at any depth, under any key), and a URL
a tool returns (a search hit, an MCP result's link) that this policy refuses never becomes a source.
The same policy runs in the egress proxy (`tools/egress.py`) that stdio MCP servers are started behind,
on every hop they make, redirects included.

The host judged is the host a client connects to, not the string. HTTP clients disagree about how to
read a URL: urllib percent-decodes the host (`%31%32%37.0.0.1`), browsers, curl and Node's `fetch` parse
by WHATWG — UTS-46 mapping (`①②⑦.0.0.1`, full-width dots), `\\` read as `/` (`169.254.169.254\\.x`),
a trailing dot dropped, `0x7f.1` and `2130706433` read as IPv4 — and Python's socket layer maps a
Unicode name with its own IDNA codec. So every URL is read several ways: by `urllib.parse` (and
percent-decoded, as urllib does), by the WHATWG parser Node itself uses (`ada-url`), and each name
through UTS-46 and Python's IDNA codec; every reading must be public, and all readings must name the
same host — a host that clients read differently is refused whatever it names.

Refused, for every host (`allow_hosts` included):
* a scheme other than http or https (`file:`, `gopher:`, `dict:`, `ftp:`, `data:` …), a URL without a
  host, a URL the WHATWG parser refuses;
* a user name or password in the URL (`http://public.example@10.0.0.1/` reads as one host and is another).
Refused unless `[tool.research-dispatch.destinations] allow_hosts` lists the host *with its port* (an
entry without a port allows ports 80 and 443 only):
* an address that is not globally reachable — loopback, private, link-local (the metadata address),
  shared (100.64/10), reserved, multicast, unspecified — in any spelling a resolver accepts (`127.1`,
  `2130706433`, `0x7f.0.0.1`), and an IPv6 address that carries one (IPv4-mapped and -compatible
  `[::127.0.0.1]`, NAT64 `64:ff9b::/96` and `64:ff9b:1::/48`, 6to4 `2002::/16`, Teredo);
* a host name that is not public: a single label (`localhost`, `metadata`), or one under a name kept
  for local use (`LOCAL_SUFFIXES`: `.localhost`, `.local`, `.internal`, `.svc`, `.consul`, …).

What it does not do: resolve names. A public name that resolves to a private address is the network's
to refuse, or the egress proxy's, which resolves each name once, refuses it when any address is not
public, and connects to the address it checked. An MCP server that ignores the proxy variables, or one
reached over HTTP (`url`), fetches on its own: its redirects and DNS are its own (README, MCP servers).
"""

from __future__ import annotations

import encodings.idna  # noqa: F401  (`str.encode("idna")` below: loaded here, never first on a leg thread)
import ipaddress
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

import ada_url

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Host = Address | str  # an address, or a canonical ASCII name (lower case, no trailing dot)

LOCAL_SUFFIXES = (".localhost", ".local", ".localdomain", ".internal", ".home.arpa", ".home", ".lan", ".intranet",
                  ".corp", ".private", ".svc", ".consul")
DEFAULT_PORTS = {"http": 80, "https": 443}
# A string a tool could take for a URL: `scheme://…`, `//host…`, or a scheme that needs no `//` (`file:/…`,
# `data:…`). Not any `word:` — a search phrase "S3: bucket policy" is no URL.
_URL_LIKE = re.compile(r"^\s*(?:[A-Za-z][A-Za-z0-9+.-]{0,31}:(?://|\\\\|/\\|\\/)|//|\\\\|(?:file|data|javascript|"
                       r"vbscript|gopher|dict|ldap|jar|netdoc|ftp|tftp|smb|ssh|telnet|http|https):)", re.IGNORECASE)
_SCHEME_SLASHES = re.compile(r"^\s*(?:[A-Za-z][A-Za-z0-9+.-]{0,31}:)?(?://|\\\\|/\\|\\/)")
_EMBEDDED_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]{0,31}://[^\s<>\"'`]+")
# Words of an argument's name that say what its value is: a URL (judged strictly), or a host (judged as one).
_URL_WORDS = frozenset({"url", "urls", "uri", "uris", "href", "link", "links", "src", "location"})
_HOST_WORDS = frozenset({"host", "hosts", "hostname", "hostnames", "domain", "domains", "server", "servers",
                         "endpoint", "endpoints", "address", "addresses", "addr", "ip", "ips", "target", "site",
                         "origin", "proxy", "remote", "netloc", "authority"})
_KEY_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
# A bare value that could name a host: `host[:port][/path]` or `[v6][:port][/path]` with no space.
_BARE_HOST = re.compile(r"^(?P<host>\[[^\]\s]*\]|[^\s/\\?#@:\[\]]+)(?::(?P<port>\d{1,5}))?(?:[/\\?#]\S*)?$")
_IPV4_PART = re.compile(r"0[xX][0-9a-fA-F]*|[0-9]+")
_NUMBER_LIKE = re.compile(r"^v?\d+(?:\.\d+){0,2}$", re.IGNORECASE)  # `0.5`, `1.2.3`, `v3.12`: a number, no host

_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_NAT64_LOCAL = ipaddress.IPv6Network("64:ff9b:1::/48")  # RFC 8215: local use, never public
_IPV4_COMPATIBLE = ipaddress.IPv6Network("::/96")
_IPV4_TRANSLATED = ipaddress.IPv6Network("::ffff:0:0:0/96")  # RFC 2765 (SIIT)


@dataclass(frozen=True)
class Allowed:
    """One `allow_hosts` entry: a host, and the port it is allowed on (None: 80 and 443)."""

    host: Host
    port: int | None

    def admits(self, host: Host, port: int) -> bool:
        return self.host == host and (port in (80, 443) if self.port is None else port == self.port)


def parse_allowed(entry: str) -> Allowed:
    """`docs.internal`, `docs.internal:8080`, `10.0.0.5`, `[fd00::5]:8443`: ValueError when it is none."""
    text = entry.strip()
    match = re.fullmatch(r"\[(?P<v6>[0-9A-Fa-f:.]+)\](?::(?P<port6>\d{1,5}))?|(?P<name>[^\s:\[\]/@]+)"
                         r"(?::(?P<port>\d{1,5}))?|(?P<bare6>[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*)", text)
    if match is None:
        raise ValueError(f"{entry[:100]!r} is not a host, host:port or [IPv6]:port")
    port_text = match["port6"] or match["port"]
    port = int(port_text) if port_text else None
    if port is not None and not 1 <= port <= 65535:
        raise ValueError(f"{entry[:100]!r}: the port must be 1-65535")
    raw = match["v6"] or match["bare6"] or match["name"] or ""
    hosts = _canonical(raw)
    if len(hosts) != 1:
        raise ValueError(f"{entry[:100]!r} is not a plain host name or address")
    return Allowed(next(iter(hosts)), port)


@dataclass(frozen=True)
class DestinationPolicy:
    """The policy of one leg: refuses non-public destinations except the configured hosts (with ports)."""

    allowed: frozenset[Allowed] = frozenset()

    @classmethod
    def allowing(cls, hosts: Iterable[str]) -> DestinationPolicy:
        return cls(frozenset(parse_allowed(host) for host in hosts if host.strip()))

    def refusal(self, url: str) -> str | None:
        """Why `url` may not be fetched or cited, or None when it may."""
        return self._judge(url, strict=True)

    def host_refusal(self, host: str, port: int) -> str | None:
        """Why a connection to `host:port` (a proxy's CONNECT) may not be made, or None when it may."""
        spelled = f"[{host}]" if ":" in host and not host.startswith("[") else host
        return self._judge(f"https://{spelled}:{port}/", strict=True)

    def address_refusal(self, host: str, port: int, address: str) -> str | None:
        """Why `host:port`, resolved to `address`, may not be connected to (the egress proxy's DNS check)."""
        hosts = _canonical(host)
        if any(self._admits(h, port) for h in hosts):
            return None
        try:
            resolved = ipaddress.ip_address(address.split("%", 1)[0])
        except ValueError:
            return f"{host} resolved to {address!r}, which is not an address"
        why = _address_refusal(resolved)
        return f"{host} resolves to {why}" if why else None

    def refusals(self, arguments: Any) -> list[str]:
        """`value: why` for every URL or host in a tool call's arguments that the policy refuses (none: may
        call). Every string is looked at, at any depth, dict keys included."""
        found = []
        for value, strict in _candidates(arguments):
            why = self._judge(value, strict=strict)
            if why is not None:
                found.append(f"{value[:200]}: {why}")
        return found

    # ------------------------------------------------------------------------------------------------
    def _admits(self, host: Host, port: int) -> bool:
        return any(entry.admits(host, port) for entry in self.allowed)

    def _judge(self, url: str, *, strict: bool) -> str | None:
        """Strict: `url` must be a plain public http(s) URL. Lenient (a bare value or a URL inside text): it
        is refused only when some reading of it names a host that is not public."""
        text = url.strip()
        try:
            parts = urlsplit(text)
            py_host = parts.hostname
            py_port = parts.port
        except ValueError:
            return "not a URL" if strict else None
        scheme = parts.scheme.lower()
        whatwg = _whatwg(text)
        if strict:
            if scheme not in DEFAULT_PORTS:
                return f"the {scheme}: scheme is not allowed (only http and https)" if scheme else "no http(s) scheme"
            if whatwg is None:
                return "not a URL that HTTP clients read alike (the WHATWG URL parser refuses it)"
            if whatwg["protocol"] not in ("http:", "https:"):
                return f"the {whatwg['protocol']} scheme is not allowed (only http and https)"
            if parts.username is not None or parts.password is not None or whatwg["username"] or whatwg["password"]:
                return "a URL carrying a user name or password"
            if not py_host:
                return "no host"
        spelled = [h for h in (py_host, whatwg["hostname"] if whatwg else None) if h]
        hosts = {host for raw in spelled for host in _canonical(raw)}
        if not hosts:
            return None if not strict else "no host"
        ports = {p for p in (py_port, int(whatwg["port"]) if whatwg and whatwg["port"] else None) if p is not None}
        port = min(ports) if ports else DEFAULT_PORTS.get(scheme, 80)
        ambiguous = len(hosts) > 1 or len(ports) > 1
        if all(self._admits(host, p) for host in hosts for p in ports or {port}):
            return _ambiguous(spelled, hosts) if strict and ambiguous else None
        for host in sorted(hosts, key=str):
            why = None if self._admits(host, port) else _host_refusal(host)
            if why is not None:
                return why
        return _ambiguous(spelled, hosts) if strict and ambiguous else None

def _ambiguous(spelled: list[str], hosts: set[Host]) -> str:
    return (f"clients read the host {spelled[0][:80]!r} differently ({', '.join(sorted(map(str, hosts)))}); "
            "spell the host plainly")


def _whatwg(text: str) -> dict[str, str] | None:
    """The URL as the WHATWG URL standard reads it (browsers, Node, curl alike), or None if it refuses it."""
    try:
        parsed = ada_url.parse_url(text, attributes=("protocol", "username", "password", "hostname", "port"))
    except ValueError:
        return None
    return {name: str(value) for name, value in parsed.items()}


def _canonical(raw: str) -> set[Host]:
    """Every host a client may connect to for the host string `raw`: percent-decoded (urllib) or not,
    mapped by UTS-46 (WHATWG, the `idna` package) and by Python's IDNA codec (the socket layer), lower
    case, without trailing dots, and an address in any `inet_aton` spelling read as that address."""
    hosts: set[Host] = set()
    for spelling in {raw, unquote(raw)}:
        plain = spelling.strip().removeprefix("[").removesuffix("]")
        names = {plain.lower()} if plain.isascii() else {n for n in (_uts46(plain), _python_idna(plain)) if n}
        for name in names or {plain.lower()}:
            name = name.rstrip(".")
            if name:
                address = _ip_literal(name)
                hosts.add(address if address is not None else name)
    return hosts


def _uts46(name: str) -> str | None:
    try:
        return ada_url.idna_to_ascii(name.encode("utf-8")).decode("ascii").lower() or None
    except (ValueError, UnicodeError):
        return None


def _python_idna(name: str) -> str | None:
    try:
        return name.encode("idna").decode("ascii").lower()
    except UnicodeError:
        return None


def _ip_literal(host: str) -> Address | None:
    """The address `host` spells, in any form a resolver's `inet_aton` accepts, else None (a name)."""
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return _inet_aton(host)


def _inet_aton(host: str) -> ipaddress.IPv4Address | None:
    """`127.1`, `2130706433`, `0x7f.1`, `0177.0.0.1`: the shortened, hex and octal IPv4 forms that
    `getaddrinfo` resolves as addresses (so a server would connect to them) but `ip_address` refuses."""
    parts = host.split(".")
    if not 1 <= len(parts) <= 4:
        return None
    numbers: list[int] = []
    for part in parts:
        if not _IPV4_PART.fullmatch(part):
            return None
        try:
            numbers.append(int(part[2:] or "0", 16) if part[:2].lower() == "0x" else
                           int(part, 8) if len(part) > 1 and part.startswith("0") else int(part, 10))
        except ValueError:  # `08`: not octal
            return None
    *head, last = numbers
    if any(n > 255 for n in head) or last >= 256 ** (5 - len(numbers)):
        return None
    value = 0
    for n in head:
        value = value * 256 + n
    value = value * 256 ** (5 - len(numbers)) + last
    return ipaddress.IPv4Address(value) if value < 2 ** 32 else None


def embedded_ipv4(address: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address carries to a v4 host: IPv4-mapped, -compatible and -translated,
    NAT64 (well-known prefix), 6to4, and both ends of Teredo."""
    found = []
    low = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address.ipv4_mapped is not None:
        found.append(address.ipv4_mapped)
    if address in _IPV4_COMPATIBLE or address in _IPV4_TRANSLATED or address in _NAT64:
        found.append(low)
    if address.sixtofour is not None:
        found.append(address.sixtofour)
    if address.teredo is not None:
        found += list(address.teredo)
    return found


def _address_refusal(address: Address) -> str | None:
    if not address.is_global or getattr(address, "scope_id", None):
        return f"{address}, which is not a public address"
    if isinstance(address, ipaddress.IPv6Address):
        if address in _NAT64_LOCAL:
            return f"{address} (local-use NAT64), which is not a public address"
        for inner in embedded_ipv4(address):
            if not inner.is_global:
                return f"{address} (it carries {inner}), which is not a public address"
    return None


def _host_refusal(host: Host) -> str | None:
    if not isinstance(host, str):
        why = _address_refusal(host)
        return f"{why.removesuffix(', which is not a public address')} is not a public address" if why else None
    if "." not in host or host.endswith(LOCAL_SUFFIXES) or f".{host}" in LOCAL_SUFFIXES:
        return f"{host} is not a public host name"
    return None


def _key_words(key: str) -> set[str]:
    return {word.lower() for word in _KEY_WORD.findall(key)}


def _candidates(arguments: Any) -> Iterator[tuple[str, bool]]:
    """(value, strict) for every string in a tool call's arguments that could name a destination.

    Strict (a URL): a value that starts like one (`scheme://`, `//`, `file:`), or any value under a key
    that names one (`url`, `href`, `links`, …). Lenient (judged as a host): a value under a key that names
    a host (`host`, `domain`, `server`, `address`, `ip`, …); a bare `host[:port][/path]` elsewhere that has
    a dot, a port or brackets (not `0.5` or `1.2.3`, which are numbers); an IPv6 address; every
    `scheme://…` inside free text. Iterative, so no depth is out of reach."""
    stack: list[tuple[Any, str]] = [(arguments, "")]
    while stack:  # depth-first, in document order
        value, key = stack.pop()
        if isinstance(value, dict):
            for name, item in reversed(list(value.items())):
                stack += [(item, str(name)), (str(name), "")]
        elif isinstance(value, (list, tuple)):
            stack += [(item, key) for item in reversed(value)]
        elif isinstance(value, str):
            yield from _string_candidates(value, _key_words(key) if key else set())

def _string_candidates(value: str, words: set[str]) -> Iterator[tuple[str, bool]]:
    text = value.strip()
    if not text:
        return
    spaced = any(ch.isspace() for ch in text)
    # `http: status codes explained` is a phrase; `file:///etc/passwd please` is still a URL
    if (_URL_LIKE.match(text) and (not spaced or _SCHEME_SLASHES.match(text))) or words & _URL_WORDS:
        yield text, True
        return
    if spaced:
        for match in _EMBEDDED_URL.finditer(text):
            yield match.group(0), False
        return
    bare = _BARE_HOST.match(text)
    if words & _HOST_WORDS:
        yield f"http://{text}", False
    elif _ip_literal(text.removeprefix("[").removesuffix("]")) is not None and ":" in text:
        yield f"http://[{text.removeprefix('[').removesuffix(']')}]/", False
    elif bare is not None and not _NUMBER_LIKE.match(text) and (
            "." in bare["host"] or bare["host"].startswith("[") or (bare["port"] and not bare["host"].isdigit())):
        yield f"http://{text}", False
