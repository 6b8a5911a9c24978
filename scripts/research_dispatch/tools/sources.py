"""The sources of one leg: the registry that numbers them `S<n>`, what was shown of each, and a page's identity.

Why a module of its own, below the transports: a report, its evidence file and `verify` need these types
(citations are checked against the registry and the passages shown), but none of them calls a search
provider or an MCP server. Kept apart from `search.py`, reading a report imports no client library
(tavily, exa, mcp, requests): `check`, `plan` and `verify` start in a fraction of the time.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from research_dispatch.core import sanitize

__all__ = ["WEB_EXTRACT", "WEB_SEARCH", "Passage", "Source", "SourceRegistry", "mcp_tool", "normalise_url",
           "source_header"]

_TRACKING_PARAMS = re.compile(r"^(utm_.*|fbclid|gclid|mc_cid|mc_eid|ref|ref_src)$", re.IGNORECASE)


def normalise_url(url: str, *, reading: bool = False) -> str:
    """The identity of a page: scheme-agnostic, lower-case host without www, no fragment, no tracking.

    An arXiv paper is one source whether it is named by its abstract page (`/abs/`) or its PDF (`/pdf/`),
    in any version; `reading=True` keeps the two apart: they are two readings of the source (the abstract
    page, the full paper), and a reading is fetched as asked."""
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return url.strip()
    host = (parts.hostname or "").lower()
    host = host.removeprefix("www.")
    if parts.port and parts.port not in (80, 443):
        host = f"{host}:{parts.port}"
    path = re.sub(r"/{2,}", "/", parts.path or "/")
    if host.endswith("arxiv.org"):
        if not reading:
            path = re.sub(r"^/pdf/", "/abs/", path)
        path = re.sub(r"(\d{4}\.\d{4,5})(v\d+)?(\.pdf)?$", r"\1", path)
    if len(path) > 1:
        path = path.rstrip("/")
    query = urlencode(sorted((k, v) for k, v in parse_qsl(parts.query) if not _TRACKING_PARAMS.match(k)))
    return urlunsplit(("https", host, path, query, ""))


WEB_SEARCH = "web_search"
WEB_EXTRACT = "web_extract"


def mcp_tool(exposed: str) -> str:
    """The `tool` of a passage an MCP tool returned: `mcp:<server>__<tool>` (the name the model called)."""
    return f"mcp:{exposed}"


@dataclass(frozen=True)
class Passage:
    """One text the researcher was shown for a source, exactly as sent (sanitised for the model): a search
    snippet (`tool` "web_search"), one passage of a page it read ("web_extract"), or an MCP result
    (`mcp_tool`). The leg's evidence file is made of these (`leg/evidence.py`): a citation can only be
    checked against what the model actually saw, never against the whole page."""

    tool: str
    text: str


@dataclass
class Source:
    id: int
    url: str
    title: str
    snippet: str = ""
    extracted: bool = False
    shown: bool = False  # its text has been shown to the model in this leg (a repeat is listed by id only)
    passages: set[str] = field(default_factory=set)  # `chunks.chunk_key` of page passages already shown
    provider: str = ""  # who found it first (a search provider's name, or "mcp:<server>")
    shown_passages: list[Passage] = field(default_factory=list)  # every distinct text shown, first-shown order

    @property
    def label(self) -> str:
        return f"S{self.id}"

    def show(self, tool: str, *texts: str) -> None:
        """Record texts of this source that are being sent to the model. Call it only where a text goes
        into a tool result: what was never shown is no evidence. A text shown again (by another tool,
        or a re-read) is kept once, under the tool that showed it first."""
        for text in texts:
            shown = sanitize.for_model(text).strip()
            if shown and all(p.text != shown for p in self.shown_passages):
                self.shown_passages.append(Passage(tool, shown))


@dataclass
class SourceRegistry:
    """Sources retrieved in one leg, numbered in order of first retrieval."""

    _by_key: dict[str, Source] = field(default_factory=dict)
    _by_id: dict[int, Source] = field(default_factory=dict)

    def add(self, url: str, title: str, snippet: str = "", provider: str = "") -> Source:
        key = normalise_url(url)
        source = self._by_key.get(key)
        if source is None:
            source = Source(id=len(self._by_id) + 1, url=url.strip(), title=sanitize.one_line(title or url, 300),
                            snippet=snippet, provider=provider)
            self._by_key[key] = source
            self._by_id[source.id] = source
        elif title and source.title == source.url:
            source.title = sanitize.one_line(title, 300)
        return source

    def get(self, source_id: int) -> Source | None:
        return self._by_id.get(source_id)

    def by_url(self, url: str) -> Source | None:
        return self._by_key.get(normalise_url(url))

    def all(self) -> list[Source]:
        return [self._by_id[i] for i in sorted(self._by_id)]

    def __len__(self) -> int:
        return len(self._by_id)


def source_header(source: Source, *, seen: str | None = None) -> str:
    """The opening tag of a source's element in a tool result or the dossier (attribute values escaped);
    `seen`, in the dossier, says how the model knew the source (read in full, or a search snippet only)."""
    how = f' seen="{html.escape(seen, quote=True)}"' if seen else ""
    return (f'<source id="{source.label}" url="{html.escape(source.url, quote=True)}" '
            f'title="{html.escape(source.title, quote=True)}"{how}>')
