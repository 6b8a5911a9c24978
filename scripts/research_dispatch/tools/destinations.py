"""Where a model may send a tool: the destination policy for every URL a model passes to a tool.

Why here and not in each MCP server: a model chooses the URL, and a page it read can tell it which. An
MCP `fetch` server fetches whatever it is told, from the runner's network — a cloud metadata address
(`169.254.169.254`, `metadata.google.internal`), a service on loopback, the office's private ranges —
and its answer would be shown to the model and cited as a source in a committed report. So before any
tool call, every URL in its arguments is checked here, and a URL a tool returns (a search hit, an MCP
result's link) that this policy refuses never becomes a source.

Refused, unless the host is listed in `[tool.research-dispatch.destinations] allow_hosts`:
* a scheme other than http or https (`file:`, `gopher:`, `ftp:`, `data:` …), or a URL without a host;
* a user name or password in the URL (`http://public.example@10.0.0.1/` reads as one host and is another);
* an IP literal that is not globally reachable — loopback, private, link-local (the metadata address),
  shared (100.64/10), reserved, multicast, unspecified — in any spelling a resolver accepts (`127.1`,
  `2130706433`, `0x7f.0.0.1`, `[::ffff:127.0.0.1]`);
* a host name that is not public: a single label (`localhost`, `metadata`), or one under a name kept
  for local use (`.localhost`, `.local`, `.internal`, `.home.arpa`, `.lan`, `.intranet`, `.corp`).
What it does not do: resolve names. A public name that resolves to a private address is the network's
to refuse (the runner's egress rules); resolving here would add a lookup per call and still race the
server's own lookup.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

LOCAL_SUFFIXES = (".localhost", ".local", ".internal", ".home.arpa", ".lan", ".intranet", ".corp")
# A string a tool could take for a URL: `scheme://…`, `//host…`, or a scheme that needs no `//` (`file:/…`,
# `data:…`). Not any `word:` — a search phrase "S3: bucket policy" is no URL.
_URL_LIKE = re.compile(r"^\s*(?:[A-Za-z][A-Za-z0-9+.-]{0,31}://|//|(?:file|data|javascript|vbscript|gopher|dict|"
                       r"ldap|jar|netdoc|ftp|tftp|smb|ssh|telnet):)", re.IGNORECASE)
_URL_KEY = re.compile(r"url|uri|href|link|endpoint|address", re.IGNORECASE)
_SCHEMES = frozenset({"http", "https"})
_MAX_DEPTH = 6


@dataclass(frozen=True)
class DestinationPolicy:
    """The policy of one leg: refuses non-public destinations except the configured hosts."""

    allow_hosts: frozenset[str] = frozenset()

    @classmethod
    def allowing(cls, hosts: Iterable[str]) -> DestinationPolicy:
        return cls(frozenset(host.strip().lower().rstrip(".") for host in hosts if host.strip()))

    def refusal(self, url: str) -> str | None:
        """Why `url` may not be fetched or cited, or None when it may."""
        text = url.strip()
        try:
            parts = urlsplit(text)
            host = (parts.hostname or "").rstrip(".")
        except ValueError:
            return "not a URL"
        if host and host in self.allow_hosts:
            return None
        scheme = parts.scheme.lower()
        if scheme not in _SCHEMES:
            return f"the {scheme}: scheme is not allowed (only http and https)" if scheme else "no http(s) scheme"
        if not host:
            return "no host"
        if parts.username is not None or parts.password is not None:
            return "a URL carrying a user name or password"
        address = _ip_literal(host)
        if address is not None:
            return None if address.is_global else f"{host} is not a public address"
        if "." not in host or host.endswith(LOCAL_SUFFIXES):
            return f"{host} is not a public host name"
        return None

    def refusals(self, arguments: Any) -> list[str]:
        """`url: why` for every URL in a tool call's arguments that the policy refuses (none: may call)."""
        return [f"{value[:200]}: {why}" for value in _url_values(arguments)
                if (why := self.refusal(value)) is not None]


def _ip_literal(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The address `host` spells, in any form a resolver's `inet_aton` accepts, else None (a name)."""
    address: ipaddress.IPv4Address | ipaddress.IPv6Address | None
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        address = _inet_aton(host)
    if address is None:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _inet_aton(host: str) -> ipaddress.IPv4Address | None:
    """`127.1`, `2130706433`, `0x7f.1`, `0177.0.0.1`: the shortened, hex and octal IPv4 forms that
    `getaddrinfo` resolves as addresses (so a server would connect to them) but `ip_address` refuses."""
    parts = host.split(".")
    if not 1 <= len(parts) <= 4:
        return None
    numbers: list[int] = []
    for part in parts:
        try:
            numbers.append(int(part, 16) if part.lower().startswith("0x") else
                           int(part, 8) if len(part) > 1 and part.startswith("0") else int(part, 10))
        except ValueError:
            return None
    *head, last = numbers
    if any(n > 255 for n in head) or last >= 256 ** (5 - len(numbers)):
        return None
    value = 0
    for n in head:
        value = value * 256 + n
    value = value * 256 ** (5 - len(numbers)) + last
    return ipaddress.IPv4Address(value) if value < 2 ** 32 else None


def _url_values(value: Any, key: str = "", depth: int = 0) -> Iterator[str]:
    """Strings in a tool call's arguments that a tool could take for a URL: any value that starts with a
    scheme or `//`, and any string under a key that names one (`url`, `uri`, `href`, …)."""
    if depth > _MAX_DEPTH:
        return
    if isinstance(value, str):
        if _URL_LIKE.match(value) or (key and _URL_KEY.search(key)):
            yield value
    elif isinstance(value, dict):
        for name, item in value.items():
            yield from _url_values(item, str(name), depth + 1)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _url_values(item, key, depth + 1)
