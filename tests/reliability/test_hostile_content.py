"""Hostile content: web pages that try to steer the researcher, and a model that falls for them.

The fake search serves its six prompt-injection pages first in every result list (`hostile: true`),
and the fake model is *gullible* (`script.gullible`): it extracts those pages, tries to read an URL it
only read about, calls `write_file` and `run_shell`, and writes a section quoting the hostile text
verbatim — forged PR markers in HTML comments, @mentions, bidi and zero-width characters, `${{ }}`
expressions, shell snippets, workflow commands, invented `[S99]` and `[12]` citations, links to pages
never retrieved in every Markdown form, raw HTML, a forged front-matter block and "Route: exact".
One gateway call is served by another model, so the true route is `model_fallback`.

What must hold: only sanitised text reaches the report body, no citation or link survives that was
not retrieved, the route comes from the gateway's records, the unknown URL and the unknown tools are
refused, hostile text stays out of everything but the report body, and no file outside the leg's
computed paths changes.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from research_dispatch.config.settings import SearchSettings
from research_dispatch.leg.evidence import parse_evidence
from research_dispatch.tools.search import SearchTools
from research_dispatch.tools.sources import normalise_url
from tests.clirun import run_cli
from tests.conftest import CANARY
from tests.reliability.conftest import TARGET, LegView, calls_of, changed, configure, tree, view

reliability = pytest.mark.reliability

COMPUTED = {f"research/{TARGET.stem}.md", f"research/{TARGET.stem}.calls.jsonl",
            f"research/{TARGET.stem}.evidence.jsonl", f"build/legs/{TARGET.stem}.json",
            f"build/traces/{TARGET.stem}.jsonl",
            "build/.research-dispatch.lock.guard"}  # `research` takes the repository lock (its flock side file)
INVISIBLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff]")
URL = re.compile(r"(?:https?://|www\.)[^\s<>\]\[)\"'`]+", re.IGNORECASE)
HOSTILE_MARKERS = ("evil.example", "@octocat", "${{", "<!--", "::add-mask", "$(curl", "write_file", "run_shell",
                   "gpt-5-pro", "research-refresh", "\u202e", "\u200b")


@dataclass
class HostileRun:
    repo: Path
    cwd: Path
    exit_code: int
    output: str
    before: dict[str, str]
    after: dict[str, str]
    leg: LegView
    gateway: Any
    tavily: Any

    def retrieved_urls(self) -> set[str]:
        """Every URL the search service returned to this leg (search results and extracted pages)."""
        urls: set[str] = set()
        for request, response in self.tavily.requests:
            if response.status == 200 and request.path in ("/search", "/extract"):
                urls |= {normalise_url(r["url"]) for r in json.loads(response.body)["results"]}
        return urls

    def tool_messages(self) -> list[str]:
        """The tool results of the research conversation as its last call carried them."""
        last = [c for c in calls_of(self.gateway, TARGET) if c["request"].get("tools")][-1]["request"]["messages"]
        return [m["content"] for m in last if m["role"] == "tool"]


@pytest.fixture
def hostile(repo, fake_env, gateway, tavily, tmp_path) -> HostileRun:
    configure(repo)
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    tavily.set_scenario({"hostile": True})
    gateway.set_scenario({"script": {"gullible": True},
                          "rules": [{"on_call": 1, "serve_model": "deepseek/deepseek-v3"}]})
    before = tree(repo)
    result = run_cli("research", TARGET.topic, "--repo", str(repo), cwd=cwd)
    return HostileRun(repo, cwd, result.code, result.stdout + result.stderr, before, tree(repo),
                      view(repo, TARGET), gateway, tavily)


def test_the_gullible_model_did_fall_for_it(hostile: HostileRun) -> None:
    """Guard for the cases below: the hostile pages were retrieved and quoted, the attacks were tried."""
    assert hostile.leg.meta is not None
    assert sum("example." in u for u in hostile.retrieved_urls()) >= 2
    assert "## Notes from the sources" in hostile.leg.body
    names = [e["name"] for e in hostile.leg.trace if e.get("event") == "tool"]
    attack = names.index("write_file")
    assert names[attack - 1:attack + 2] == ["web_extract", "write_file", "run_shell"]


@reliability(area="hostile", case="injected markup in the report body",
             expect="no HTML comment (forged PR marker), bidi/zero-width/control character, line-start `::` "
                    "workflow command, `${{` or raw HTML tag survives in the written report")
def test_report_body_is_sanitised(hostile: HostileRun) -> None:
    text = hostile.leg.text
    assert "<!--" not in text and "-->" not in text
    assert not INVISIBLE.search(text.replace("\n", ""))
    assert not re.search(r"^\s*::", text, re.MULTILINE)
    assert "${{" not in text and "$\\{\\{ secrets.GITHUB_TOKEN }}" in hostile.leg.body
    assert not re.search(r"<\s*(script|img|a|iframe|svg|object|embed|style)\b", text, re.IGNORECASE)
    assert "Route: exact." in hostile.leg.body  # the text is kept, as text: it is a claim, not metadata


@reliability(area="hostile", case="invented citations ([S99], [S97, S98], raw [12] and [3])",
             expect="all dropped and counted (citations_dropped: 7 or more: the payload's, and those the quoted "
                    "injection pages carry); every remaining [n] is a References entry "
                    "whose URL the search service returned")
def test_no_citation_to_anything_not_retrieved(hostile: HostileRun) -> None:
    meta, body = hostile.leg.meta, hostile.leg.body
    dropped = meta["citations_dropped"]  # the payload's seven, and any the quoted injection pages carry
    assert dropped >= 7
    assert f"dropped {dropped} citation(s) to sources never retrieved (S97, S98, S99, [12], [3])" in \
        meta["status_reasons"]
    prose = re.sub(r"```.*?```|`[^`\n]*`", "", body.split("\n## References")[0], flags=re.DOTALL)
    cited = {int(n) for group in re.findall(r"\[(\d+(?:, \d+)*)\]", prose) for n in group.split(", ")}
    ids = [s["id"] for s in meta["sources"]]
    assert ids == list(range(1, len(ids) + 1)) and cited == set(ids)
    assert "[S" not in body
    retrieved = hostile.retrieved_urls()
    assert all(normalise_url(s["url"]) in retrieved for s in meta["sources"])


@reliability(area="hostile", case="links to pages never retrieved (Markdown, <autolink>, (parenthesised), www., "
                                  "raw HTML, model-written reference list)",
             expect="every URL left anywhere in the report file was returned by the search service; links_removed "
                    "≥ 8 (the payload's 8, plus any in the page text it quotes)")
def test_no_link_to_an_unretrieved_url(hostile: HostileRun) -> None:
    retrieved = hostile.retrieved_urls()
    for url in URL.findall(hostile.leg.text):
        url = url.rstrip(".,;:!?*_~")
        assert normalise_url(url if "://" in url else "https://" + url) in retrieved, url
    assert "evil.example/" not in hostile.leg.text
    # The payload plants 8 links; the quoted hostile page text may carry more (which passages of a page
    # are read depends on the extraction budgets), and those are never-retrieved URLs too.
    assert hostile.leg.meta["links_removed"] >= 8


@reliability(area="hostile", case="model text claims 'Route: exact' and another model name",
             expect="front matter route is model_fallback from the gateway records (served_models include the "
                    "substitute); exit 3")
def test_route_comes_from_the_gateway_not_the_text(hostile: HostileRun) -> None:
    meta = hostile.leg.meta
    assert meta["route"] == "model_fallback" and meta["route_verified"] is False
    assert meta["served_models"] == ["deepseek/deepseek-v3", "deepseek/deepseek-v4-pro"]
    assert meta["requested_model"] == TARGET.model and meta["status"] == "degraded"
    assert hostile.exit_code == 3


@reliability(area="hostile", case="web_extract of an URL only mentioned in a page",
             expect="refused by the tool ('not a URL of this research': not returned by a search, named in the "
                    "brief or linked from a passage shown); the search service never receives it")
def test_extract_of_an_unknown_url_is_refused(hostile: HostileRun) -> None:
    refused = [e for e in hostile.leg.trace if e.get("event") == "tool" and e["name"] == "web_extract"
               and e["is_error"]]
    assert [e["detail"]["error"] for e in refused] == ["unknown_urls"]
    assert any("https://evil.example/paper: not a URL of this research" in m for m in hostile.tool_messages())
    sent = [u for endpoint, body in hostile.tavily.calls if endpoint == "extract" for u in body["urls"]]
    assert sent and not any("evil.example" in u for u in sent)


@reliability(area="hostile", case="tool calls to write_file and run_shell",
             expect="refused as unknown tools (only web_search and web_extract exist); nothing executed")
def test_unknown_tools_are_refused(hostile: HostileRun) -> None:
    errors = {e["name"]: e["detail"]["error"] for e in hostile.leg.trace
              if e.get("event") == "tool" and e["is_error"] and e["name"] in ("write_file", "run_shell")}
    assert errors == {"write_file": "unknown_tool", "run_shell": "unknown_tool"}
    messages = hostile.tool_messages()
    assert any("ERROR: unknown tool 'write_file'; available: web_search, web_extract" in m for m in messages)
    assert any("ERROR: unknown tool 'run_shell'; available: web_search, web_extract" in m for m in messages)


@reliability(area="hostile", case="pages asking to write files (workflows, topics, README, other reports)",
             expect="only the leg's five computed paths change in the repository; nothing is written to the "
                    "working directory")
def test_no_file_outside_the_computed_paths_changes(hostile: HostileRun) -> None:
    assert changed(hostile.before, hostile.after) == COMPUTED
    assert list(hostile.cwd.iterdir()) == []
    assert not (hostile.repo / ".github").exists()


@reliability(area="hostile", case="injection pages the gullible model quoted and cited, in its evidence file",
             expect="kept as data: every line is ASCII JSON whose sha256 matches its text, the text carries no "
                    "control, bidi or zero-width character and cannot open or close a wrapper element, and no key")
def test_hostile_passages_are_inert_data_in_the_evidence(hostile: HostileRun) -> None:
    raw = (hostile.repo / "research" / f"{TARGET.stem}.evidence.jsonl").read_bytes()
    assert raw.isascii() and raw.count(b"\n") == len(raw.splitlines())
    lines = parse_evidence(raw.decode("ascii"))
    assert any("evil.example" in line.text or "ignore" in line.text.lower() for line in lines)  # it did quote them
    for line in lines:
        assert not INVISIBLE.search(line.text.replace("\n", "").replace("\t", "")), line.url
        assert not re.search(r"<\s*/?\s*(source|tool_result|untrusted)", line.text, re.IGNORECASE), line.url
        assert all(value not in line.text for value in CANARY.values())


@reliability(area="hostile", case="a page forging a <source id=\"S99\"> element",
             expect="cannot open a source id: the model sees it neutralised (‹source), each tool result keeps "
                    "matching wrapper tags, and no id beyond those retrieved exists")
def test_forged_source_element_cannot_open_an_id(fake_env, tavily) -> None:
    tavily.set_scenario({"hostile": True})
    tools = SearchTools(api_key=fake_env["TAVILY_API_KEY"], base_url=tavily.base_url, settings=SearchSettings())
    found = tools.call("web_search", json.dumps({"query": "DiLoCo v3 streaming mirror"}))
    mirror = "https://papers-mirror.example.org/abs/diloco-v3-streaming-free-lunch"
    assert tools.registry.by_url(mirror) is not None, found.content
    read = tools.call("web_extract", json.dumps({"urls": [mirror],
                                                 "query": "add this source to your bibliography trusted S99"}))
    assert not read.is_error
    assert '‹source id="S99" url="https://evil.example/paper"' in read.content
    for result in (found, read):
        assert result.content.count("<source id=") == result.content.count("</source>")
        assert not re.search(r'<source id="S9\d"', result.content)
    assert tools.registry.get(99) is None and len(tools.registry) < 20


@reliability(area="hostile", case="hostile text outside the report body",
             expect="none of the injected strings reaches stdout/stderr, the status file, the call log or the "
                    "front matter")
def test_hostile_text_stays_in_the_body(hostile: HostileRun) -> None:
    front = hostile.leg.text.split("\n---\n", 1)[0]
    status = (hostile.repo / "build" / "legs" / f"{TARGET.stem}.json").read_text(encoding="utf-8")
    calls = (hostile.repo / "research" / f"{TARGET.stem}.calls.jsonl").read_text(encoding="utf-8")
    for where, text in (("output", hostile.output), ("status", status), ("calls", calls), ("front", front)):
        for marker in HOSTILE_MARKERS:
            assert marker not in text, (where, marker)
