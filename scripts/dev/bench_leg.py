"""The research leg's figures of issue 32 for `scripts/dev/bench.py` (`--only leg`): L1–L6.

Measured through the real product (`run_leg`, `synthesize`) against the in-process fakes, from what the
fakes saw on the wire (the gateway's request log, the search server's call log) and what the leg wrote
(report, evidence file), with the figure functions the maintainers' real-model check uses too
(`leg_figures.py`). Every figure reads only the wire and the files, so the same harness measures main
and this branch: the BEFORE numbers in docs/PERFORMANCE.md were taken with this module on main.

* L1 evidence at write: the five standard legs and the 30-step reading leg (figure 4a's);
* L2 planted-claim recall on that reading leg: planted claims stated ÷ planted claims whose page the leg
  read and was shown saying them (the fake writer states one only when its passage is in the request);
* L3 snippet-only share and brief-item coverage, over the five standard reports;
* L4 the 30-step searching leg (figure 4b's): calls and prompt tokens against main's, sources cited;
* L5 recommendation structure: Recommendations lines that parse; extracted recommend-claims with a
  decision and a condition;
* L6 cost: prompt tokens per report (figure 7's standard scenario) beside report dollars (model calls and
  search credits at the documented prices) per report and per supported claim.
"""

from __future__ import annotations

import functools
import json
import re
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import leg_figures as lf  # scripts/dev is not a package

CYCLE = "2026-H2"
GATEWAY_KEY = "sk-or-bench-0000000000"
SEARCH_KEY = "tvly-bench-0000000000"
STANDARD_SCRIPT = {"searches": 5, "extract_top": 5}  # figure 7's standard scenario
READING_LEG = {"searches": 6, "per_turn": 2, "extract_top": 3, "reads": 23}  # figure 4a's
SEARCHING_LEG = {"searches": 26, "per_turn": 1, "extract_top": 3}  # figure 4b's
LONG_BUDGET = "budget: {max_steps: 30}"

# Search credits at the documented prices (Tavily: docs.tavily.com "Credits & Pricing", pay-as-you-go;
# the product's defaults, `search_prices` in config/settings.py), so that main, which did not count them,
# is priced like the branch.
TAVILY_CREDIT_USD = 0.008
TAVILY_SEARCH_CREDITS = {"basic": 1, "advanced": 2}
TAVILY_EXTRACT_CREDITS_PER_5 = {"basic": 1, "advanced": 2}

# The searching leg (figure 4b) measured on main (commit 4a7a8da) with this harness: issue 32's
# baseline for L4 (calls and prompt tokens down 40 %, citing at least as many sources).
MAIN_SEARCHING = {"commit": "4a7a8da", "calls": 28, "prompt_tokens": 82_195, "cited": 21, "cited_urls": (
    "https://www.primeintellect.ai/blog/intellect-2", "https://arxiv.org/abs/2311.08105",
    "https://arxiv.org/abs/2501.18512", "https://arxiv.org/abs/2505.07291", "https://arxiv.org/abs/2407.07852",
    "https://arxiv.org/abs/2502.16982", "https://github.com/meta-pytorch/torchforge",
    "https://github.com/pytorch/torchtitan", "https://github.com/PrimeIntellect-ai/prime-rl",
    "https://arxiv.org/abs/2603.24477", "https://arxiv.org/abs/2502.05559", "https://cursor.com/blog/composer",
    "https://github.com/PrimeIntellect-ai/verifiers", "https://github.com/huggingface/trl",
    "https://arxiv.org/abs/2503.14476", "https://arxiv.org/abs/1011.0686", "https://cursor.com/blog/composer-2-5",
    "https://huggingface.co/docs/trl/main/en/grpo_trainer", "https://arxiv.org/abs/2503.20783",
    "https://github.com/volcengine/verl", "https://github.com/meta-pytorch/openenv")}
MAIN = {  # L1-L6 measured on main (commit 4a7a8da's product) with this harness: the BEFORE of issue 32
    "L1": "12% worst (the reading leg; the five standard legs 100%: no compaction before their write)",
    "L2": "1 of 3 (33%)",
    "L3": "62% of cited sources only from snippets; brief-item coverage 25%",
    "L4": "28 calls, 82,195 prompt tokens, 21 cited",
    "L5": "0% of lines parse; 2 of 9 recommend-claims (22%) carry a decision and a condition",
    "L6": "12,184 prompt tokens (worst); $0.1292 per report, $0.0323 per supported claim (20 supported claims)",
}
EVIDENCE_GOAL = 0.90
SNIPPET_ONLY_GOAL = 0.50
COVERAGE_GOAL = 0.75
STRUCTURE_GOAL = 0.80
SEARCHING_CUT = 0.40


def _real_topics() -> list[tuple[str, str, str]]:
    from bench import real_topics

    return real_topics()


@contextmanager
def _fakes(script: dict[str, Any]) -> Iterator[tuple[Any, Any, dict[str, str]]]:
    from research_dispatch_fakes.gateway import FakeGateway
    from research_dispatch_fakes.tavily import FakeTavily

    with FakeGateway(scenario={"script": script}) as gateway, FakeTavily() as tavily:
        yield gateway, tavily, {"OPENROUTER_API_KEY": GATEWAY_KEY, "TAVILY_API_KEY": SEARCH_KEY,
                                "OPENROUTER_BASE_URL": gateway.base_url, "TAVILY_BASE_URL": tavily.base_url}


def search_dollars(calls: list[tuple[str, Any]]) -> float:
    """What the search server's requests cost at the documented prices (failed URLs are free)."""
    from research_dispatch_fakes.corpus import page_by_url

    credits = 0.0
    for endpoint, body in calls:
        body = body if isinstance(body, dict) else {}
        if endpoint == "search":
            credits += TAVILY_SEARCH_CREDITS.get(str(body.get("search_depth") or "basic"), 1)
        elif endpoint == "extract":
            urls = body.get("urls") or []
            urls = [urls] if isinstance(urls, str) else urls
            read = sum(1 for url in urls if page_by_url(str(url)) is not None)
            credits += read / 5 * TAVILY_EXTRACT_CREDITS_PER_5.get(str(body.get("extract_depth") or "basic"), 1)
    return round(credits * TAVILY_CREDIT_USD, 6)


def _leg_facts(repo: Path, settings: Any, leg: Any, result: Any, completions: list[dict[str, Any]],
               search_calls: list[tuple[str, Any]]) -> lf.LegFacts:
    from research_dispatch.leg.report import load_report

    report = load_report(repo / result.report, repo=repo)
    session = f"{CYCLE}:{leg.stem}"
    mine = [c for c in completions if c.get("session") == session and c.get("usage")]
    evidence = lf.read_evidence(repo / leg.evidence_relpath(settings))
    meta = report.meta
    return lf.LegFacts(
        stem=leg.stem, topic=leg.topic.id, scope=leg.topic.scope, body=report.body,
        cited_urls=tuple(s.url for s in meta.sources), evidence=evidence,
        write_request=lf.request_text(mine[-1]["request"]["messages"]) if mine else None,
        status=meta.status, reasons=tuple(meta.status_reasons), words=meta.words, calls=len(mine),
        prompt_tokens=sum(c["usage"]["prompt_tokens"] for c in mine),
        cost_usd=round(sum(c["usage"]["cost"] for c in mine), 6), search_cost_usd=search_dollars(search_calls),
        extra={"completions": mine})


def run_legs(script: dict[str, Any], topics: list[tuple[str, str, str]], extra: str = "", *,
             synthesize: bool = False) -> tuple[list[lf.LegFacts], dict[str, Any] | None]:
    """Each topic's leg through `run_leg` in one repository on one set of fakes (each leg with its own
    search log), then optionally the synthesis; the legs' facts and the claims ledger."""
    from bench import make_repo

    from research_dispatch.config.plan import plan_legs
    from research_dispatch.config.settings import load_settings
    from research_dispatch.config.topics import load_topics
    from research_dispatch.leg.execute import run_leg
    from research_dispatch.synthesis import synthesize as run_synthesis

    with tempfile.TemporaryDirectory(prefix="bench-leg-") as tmp, _fakes(script) as (gateway, tavily, env):
        repo = make_repo(Path(tmp), {name: text + (extra + "\n" if extra else "") for name, _, text in topics},
                         '[tool.research-dispatch]\nframework_name = "bench"\n')
        settings = load_settings(repo)
        facts = []
        for leg in plan_legs(load_topics(repo, settings), settings):
            before = len(tavily.calls)
            result = run_leg(repo, settings, leg, env=env, cycle=CYCLE)
            if result.report is None:
                raise SystemExit(f"leg {leg.stem} produced no report: {result.error}")
            facts.append(_leg_facts(repo, settings, leg, result, gateway.completions, tavily.calls[before:]))
        ledger = None
        if synthesize:
            run_synthesis(repo, settings, env=env, cycle=CYCLE)
            ledger = json.loads((repo / "framework" / "claims.json").read_text(encoding="utf-8"))
    return facts, ledger


@functools.lru_cache(maxsize=1)
def standard_run() -> tuple[tuple[lf.LegFacts, ...], dict[str, Any] | None]:
    facts, ledger = run_legs(STANDARD_SCRIPT, _real_topics(), synthesize=True)
    return tuple(facts), ledger


def _topic(topic_id: str) -> tuple[str, str, str]:
    return next(t for t in _real_topics() if t[1] == topic_id)


@functools.lru_cache(maxsize=1)
def reading_run() -> lf.LegFacts:
    facts, _ = run_legs(READING_LEG, [_topic("diloco-family")], LONG_BUDGET)
    return facts[0]


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value:.0%}"


def _figure(number: str, key: str, title: str, measured: float | None, display: str, goal: str, met: bool,
            method: str, details: dict[str, Any], why: str = "") -> dict[str, Any]:
    from bench import figure

    out = figure(number, key, title, measured, display, goal, met, method, {**details, "main": MAIN[number]}
                 if number != "L4" else details, why)
    out["command"] = ".venv/bin/python scripts/dev/bench.py --only leg"
    return out


# ----------------------------------------------------------------------------------------------
# L1, L2: evidence at write and planted-claim recall


def _evidence_row(facts: lf.LegFacts) -> dict[str, Any]:
    present, total = lf.evidence_at_write(facts)
    return {"stem": facts.stem, "present_chars": present, "shown_chars": total,
            "share": round(present / total, 4) if total else None, "calls": facts.calls,
            "cited": len(facts.cited_urls), "exercised": exercised(facts)}


def bench_evidence_at_write() -> dict[str, Any]:
    standard, _ = standard_run()
    rows = [_evidence_row(f) for f in standard] + [{**_evidence_row(reading_run()), "stem": "reading leg (4a)"}]
    worst = min(r["share"] for r in rows if r["share"] is not None)
    return _figure(
        "L1", "leg_evidence_at_write", "Evidence at write: cited sources' shown passages present in the request "
        "that produced the report (worst leg)", round(worst, 4),
        f"{worst:.0%} worst; reading leg {_pct(rows[-1]['share'])}", f"≥ {EVIDENCE_GOAL:.0%}", worst >= EVIDENCE_GOAL,
        "the five topics in the standard scenario and the diloco-family 30-step reading leg (figure 4a's script) "
        "through `run_leg` on the fakes. For each report: the characters of every passage of its evidence file "
        "(what the leg was shown for the sources the report cites) found verbatim in the messages of the last "
        "gateway call of the leg (the call that produced the report), over all those characters.",
        {"legs": rows},
        why="the report is written where the passages of its cited sources are no longer in front of the model.")


def planted_recall(facts: lf.LegFacts) -> dict[str, Any]:
    """Planted claims of the leg's topic stated in its report, against those whose page it read and was
    shown saying them (the fake's own `says`, over every passage any tool result of the leg carried)."""
    from research_dispatch_fakes import script_researcher as fake

    shown: dict[str, list[str]] = {}
    read: set[str] = set()
    seen: set[str] = set()
    for completion in facts.extra["completions"]:
        for message in completion["request"]["messages"]:
            if message.get("role") != "tool":
                continue
            text = lf.request_text([message])
            if text in seen:
                continue
            seen.add(text)
            for source in fake.parse_sources(text):
                key = fake._norm_url(source.url)
                shown.setdefault(key, []).append(source.text)
                if text.startswith('<tool_result tool="web_extract"'):
                    read.add(key)
    readable, stated = [], []
    for claim in fake.claims_for_topic(facts.topic):
        pages = [fake._norm_url(u) for u in claim.get("sources") or []]
        if any(page in read and fake.says(fake.Source(0, page, "", "\n\n".join(shown.get(page, []))),
                                          claim["statement"]) for page in pages):
            readable.append(claim["id"])
            if claim["statement"] in facts.body:
                stated.append(claim["id"])
    return {"readable": readable, "stated": stated}


def bench_planted_recall() -> dict[str, Any]:
    facts = reading_run()
    found = planted_recall(facts)
    share = len(found["stated"]) / len(found["readable"]) if found["readable"] else 0.0
    return _figure(
        "L2", "leg_planted_recall", "Planted-claim recall, 30-step reading leg: claims stated ÷ claims whose "
        "page was read", round(share, 4), f"{len(found['stated'])} of {len(found['readable'])} ({share:.0%})",
        "every planted claim whose page was read", share >= 1.0,
        "the diloco-family leg with figure 4a's script (6 searches, 23 reading turns) and `budget: {max_steps: "
        "30}`. Denominator: the topic's planted claims (corpus/claims.json) one of whose pages the leg read "
        "(`web_extract`) and was shown saying it (the fake's `says`: a passage holding 40 % of the claim's key "
        "content, over every tool result the leg received). Numerator: those whose statement the report "
        "carries — the fake writer states a claim only when its passage is in the request that writes.",
        {"stem": facts.stem, **found, "status": facts.status, "calls": facts.calls},
        why="passages read early are compacted out of the conversation before the report is written.")


# ----------------------------------------------------------------------------------------------
# L3: snippet-only share and brief-item coverage


def bench_snippets_and_coverage() -> dict[str, Any]:
    standard, _ = standard_run()
    rows = []
    for facts in standard:
        snippets, cited = lf.snippet_only(facts)
        items = lf.brief_items(facts.scope)
        hits = lf.covered(items, facts.body)
        said = any("snippet" in r for r in facts.reasons)
        rows.append({"stem": facts.stem, "snippet_only": snippets, "cited": cited, "items": len(items),
                     "covered": sum(hits), "uncovered": [i for i, h in zip(items, hits, strict=True) if not h],
                     "status": facts.status, "says_snippets_only": said})
    snippet_share = sum(r["snippet_only"] for r in rows) / max(1, sum(r["cited"] for r in rows))
    coverage = sum(r["covered"] for r in rows) / max(1, sum(r["items"] for r in rows))
    met = snippet_share <= SNIPPET_ONLY_GOAL and coverage >= COVERAGE_GOAL
    return _figure(
        "L3", "leg_snippets_coverage", "Snippet-only share of cited sources; brief items with a cited sentence "
        "(five standard reports)", round(snippet_share, 4),
        f"{snippet_share:.0%} of cited sources only from snippets; brief-item coverage {coverage:.0%}",
        f"snippet-only ≤ {SNIPPET_ONLY_GOAL:.0%}, coverage ≥ {COVERAGE_GOAL:.0%}", met,
        "the five standard reports: a cited source is snippet-only when its evidence holds no passage of a page "
        "read (`web_extract` or an MCP tool); the brief's items are split from each topic's scope by code "
        "(`leg_figures.brief_items`: the clauses of its colon lists, and its sentences that ask for something), "
        "and an item is covered when a cited sentence of the report carries at least half (and at least two) "
        "of the item's content words.",
        {"legs": rows, "coverage": round(coverage, 4)},
        why="the reports rest on search snippets, or leave parts of the brief without a cited sentence.")


# ----------------------------------------------------------------------------------------------
# L4: the searching leg


def bench_searching_leg() -> dict[str, Any]:
    facts, _ = run_legs(SEARCHING_LEG, [_topic("diloco-family")], LONG_BUDGET)
    leg = facts[0]
    base = MAIN_SEARCHING
    calls_cut = 1 - leg.calls / base["calls"]
    tokens_cut = 1 - leg.prompt_tokens / base["prompt_tokens"]
    cited = len(leg.cited_urls)
    met = calls_cut >= SEARCHING_CUT and tokens_cut >= SEARCHING_CUT and cited >= base["cited"]
    of_topic = _topic_pages(leg.topic)
    main_only = sorted(set(base["cited_urls"]) - set(leg.cited_urls))
    return _figure(
        "L4", "leg_searching", "Searching leg (4b): calls and prompt tokens against main's, sources cited",
        round(min(calls_cut, tokens_cut), 4),
        f"{leg.calls} calls ({calls_cut:+.0%}), {leg.prompt_tokens:,} prompt tokens ({tokens_cut:+.0%}), {cited} "
        f"cited (main: {base['calls']}, {base['prompt_tokens']:,}, {base['cited']})",
        f"calls and prompt tokens ≥ {SEARCHING_CUT:.0%} below main's, citing ≥ {base['cited']}", met,
        f"the diloco-family leg with figure 4b's script (`{json.dumps(SEARCHING_LEG)}`: the fake model searches 26 "
        f"times, one a turn, unless told to stop) and `{LONG_BUDGET}` through `run_leg`; main's figures were "
        f"measured with this harness at commit {base['commit']}.",
        {"calls": leg.calls, "prompt_tokens": leg.prompt_tokens, "cited": cited, "status": leg.status,
         "reasons": list(leg.reasons), "main": {k: v for k, v in base.items() if k != "cited_urls"},
         "search_usd": leg.search_cost_usd, "model_usd": leg.cost_usd,
         "topic_pages_cited": len(of_topic & set(leg.cited_urls)),
         "topic_pages_cited_on_main": len(of_topic & set(base["cited_urls"])),
         "cited_on_main_only": main_only, "main_only_off_topic": all(url not in of_topic for url in main_only),
         "exercised": exercised(leg)},
        why="the leg keeps searching after its searches stopped finding new sources, or cites fewer sources.")


# ----------------------------------------------------------------------------------------------
# L5, L6: recommendations and cost


def bench_recommendations() -> dict[str, Any]:
    standard, ledger = standard_run()
    rows = []
    for facts in standard:
        parsed, units = lf.recommendation_structure(facts.body)
        rows.append({"stem": facts.stem, "parsed": parsed, "lines": units})
    line_share = sum(r["parsed"] for r in rows) / max(1, sum(r["lines"] for r in rows))
    structured, recommend = lf.recommend_claims_structured((ledger or {}).get("claims") or [])
    claim_share = structured / recommend if recommend else 0.0
    met = line_share >= STRUCTURE_GOAL
    return _figure(
        "L5", "leg_recommendations", "Recommendation structure: Recommendations lines that parse; extracted "
        "recommend-claims with a decision and a condition", round(line_share, 4),
        f"{line_share:.0%} of lines parse; {structured} of {recommend} recommend-claims ({claim_share:.0%}) carry "
        "a decision and a condition", f"≥ {STRUCTURE_GOAL:.0%} of lines parse", met,
        "the five standard reports: each line (list item or paragraph) of `## Recommendations` parses when it "
        "matches the contract's decision form (decision, pick over alternatives, cited evidence, when to switch, "
        "confidence) or its rejected-option form (option, decision, cited reason); then the synthesis of the "
        "five on the fake gateway, and its ledger's recommend-claims that carry both a decision and a "
        "condition (the fake extractor reads the condition a line states).",
        {"legs": rows, "recommend_claims": recommend, "structured_claims": structured},
        why="the Recommendations section is free prose the synthesis cannot align decision by decision.")


def _supported_by_report(ledger: dict[str, Any] | None) -> dict[str, int]:
    counts: dict[str, int] = {}
    for claim in (ledger or {}).get("claims") or []:
        if any(c.get("support") == "supported" for c in claim.get("citations") or []):
            report = str(claim.get("report") or claim.get("stem") or "")
            counts[report] = counts.get(report, 0) + 1
    return counts


def bench_cost() -> dict[str, Any]:
    standard, ledger = standard_run()
    supported = _supported_by_report(ledger)
    rows = []
    for facts in standard:
        dollars = facts.cost_usd + facts.search_cost_usd
        claims = next((n for key, n in supported.items() if facts.stem in key), 0)
        rows.append({"stem": facts.stem, "calls": facts.calls, "prompt_tokens": facts.prompt_tokens,
                     "model_usd": facts.cost_usd, "search_usd": facts.search_cost_usd, "usd": round(dollars, 6),
                     "supported_claims": claims,
                     "usd_per_supported_claim": round(dollars / claims, 6) if claims else None})
    worst = max(r["prompt_tokens"] for r in rows)
    total = sum(r["usd"] for r in rows)
    claims = sum(r["supported_claims"] for r in rows)
    per_claim = total / claims if claims else None
    return _figure(
        "L6", "leg_cost", "Cost per report: prompt tokens (worst topic), dollars per report and per supported "
        "claim (standard scenario)", worst,
        f"{worst:,} prompt tokens (worst); ${total / len(rows):.4f} per report, "
        + (f"${per_claim:.4f} per supported claim" if per_claim else "no supported claim"),
        "reported beside figure 7 (prompt tokens may rise where they buy evidence)", True,
        "the five standard legs: prompt tokens and model dollars as the fake gateway bills them (characters / 4, "
        "$1/M prompt, $4/M completion), search dollars from the search server's log at Tavily's documented "
        "prices ($0.008 a credit; advanced search 2 credits, basic 1; 1 credit per 5 pages extracted); "
        "supported claims are the synthesis' claims of the report with a `supported` citation.",
        {"legs": rows, "supported_claims": claims, "usd_per_report": round(total / len(rows), 6),
         "usd_per_supported_claim": round(per_claim, 6) if per_claim else None})


def _topic_pages(topic: str) -> set[str]:
    from research_dispatch_fakes.corpus import load_pages

    return {p.url for p in load_pages() if topic in p.topics}


def exercised(facts: lf.LegFacts) -> dict[str, int]:
    """What the leg's conversation did, counted from the gateway's request log: turns whose tool calls ran at
    once, readings of a URL the brief names before any search, papers read at /abs/ and at /pdf/, links of
    passages followed, the plan, gap checks asked, send-backs, stalls, and writing calls without tools."""
    from research_dispatch.leg import contract
    from research_dispatch.leg.researcher import STALL_SEARCHES, brief_urls

    completions = facts.extra["completions"]
    final = completions[-1]["request"]["messages"] if completions else []
    research = [c for c in completions if c["request"].get("tools")]
    messages = research[-1]["request"]["messages"] if research else []
    turns = [m for m in messages if m.get("role") == "assistant" and m.get("tool_calls")]
    reads = [json.loads(c["function"]["arguments"]) for t in turns for c in t["tool_calls"]
             if c["function"]["name"] == "web_extract"]
    read_urls = [u for r in reads for u in r.get("urls") or []]
    users = [str(m.get("content")) for m in messages if m.get("role") == "user"]

    first = turns[0] if turns else {}
    first_reads = [u for c in first.get("tool_calls") or [] if c["function"]["name"] == "web_extract"
                   for u in json.loads(c["function"]["arguments"]).get("urls") or []]
    papers = {re.sub(r"/(abs|pdf)/", "/", u) for u in read_urls if "arxiv.org/abs/" in u} & \
        {re.sub(r"/(abs|pdf)/", "/", u) for u in read_urls if "arxiv.org/pdf/" in u}
    return {"concurrent_turns": sum(1 for t in turns if len(t["tool_calls"]) > 1),
            "brief_urls_read_at_step_1": len(set(first_reads) & set(brief_urls(facts.scope))),
            "papers_read_at_abs_and_pdf": len(papers),
            "links_followed": sum(1 for r in reads if str(r.get("query") or "").startswith("what this linked page")),
            "plan_items": sum(1 for line in str(first.get("content") or "").splitlines() if line[:1].isdigit()),
            "gap_checks_asked": sum(u.startswith(contract.GAP_CHECK_PREFIX) for u in users),
            "stalled": sum(contract.STALLED.format(count=STALL_SEARCHES).strip() in u for u in users),
            "sent_back": sum(u.startswith(contract.GAPS_PREFIX) for u in users),
            "tool_less_writes": int(bool(completions) and not completions[-1]["request"].get("tools")
                                    and any(contract.DOSSIER_LABEL in str(m.get("content")) for m in final))}


def _exercised_text(counts: dict[str, int]) -> str:
    return ", ".join(f"{name.replace('_', ' ')} {value}" for name, value in counts.items())


def bench_leg() -> list[dict[str, Any]]:
    """Issue 32's figures, in order."""
    return [bench_evidence_at_write(), bench_planted_recall(), bench_snippets_and_coverage(), bench_searching_leg(),
            bench_recommendations(), bench_cost()]


# ----------------------------------------------------------------------------------------------
# docs/PERFORMANCE.md sections


def _rows(header: str, keys: list[str], rows: list[dict[str, Any]]) -> list[str]:
    out = [header, "|" + "---|" * len(keys)]
    for row in rows:
        out.append("| " + " | ".join(_cell(row.get(k)) for k in keys) + " |")
    return out


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list):
        return "; ".join(str(v) for v in value) or "—"
    return "—" if value is None else re.sub(r"\|", "\\|", str(value))


def _section_evidence(f: dict[str, Any]) -> list[str]:
    legs = f["details"]["legs"]
    lines = _rows("| leg | shown chars of cited sources | present at write | share | calls | cited |",
                  ["stem", "shown_chars", "present_chars", "share", "calls", "cited"], legs)
    lines += ["", "What the fake model did on these legs (counted from the wire):", ""]
    lines += [f"* {leg['stem']}: {_exercised_text(leg['exercised'])}" for leg in legs if "exercised" in leg]
    return lines


def _section_recall(f: dict[str, Any]) -> list[str]:
    d = f["details"]
    return [f"Claims whose page was read and shown saying them: {', '.join(d['readable']) or 'none'}; stated in "
            f"the report: {', '.join(d['stated']) or 'none'} ({d['calls']} calls, status {d['status']})."]


def _section_coverage(f: dict[str, Any]) -> list[str]:
    return _rows("| leg | snippet-only | cited | brief items | covered | says snippets only | not covered |",
                 ["stem", "snippet_only", "cited", "items", "covered", "says_snippets_only", "uncovered"],
                 f["details"]["legs"])


def _section_searching(f: dict[str, Any]) -> list[str]:
    d = f["details"]
    main_only = ", ".join(d["cited_on_main_only"]) or "none"
    why = ("all of them other topics' pages, found by main's 15th to 24th searches" if d["main_only_off_topic"]
           else "some of them the topic's own")
    return [f"This run: {d['calls']} calls, {d['prompt_tokens']:,} prompt tokens, {d['cited']} sources cited, "
            f"status {d['status']} ({'; '.join(d['reasons']) or 'no reasons'}); model ${d['model_usd']:.4f}, "
            f"search ${d['search_usd']:.4f}. Main ({d['main']['commit']}): {d['main']['calls']} calls, "
            f"{d['main']['prompt_tokens']:,} prompt tokens, {d['main']['cited']} cited. Of the topic's own corpus "
            f"pages this run cites {d['topic_pages_cited']}, main {d['topic_pages_cited_on_main']}; cited on main "
            f"only: {main_only} ({why}).",
            "", "What the fake model did on this leg (from the wire): " + _exercised_text(d["exercised"]) + "."]


def _section_recommendations(f: dict[str, Any]) -> list[str]:
    return _rows("| leg | Recommendations lines | parsing |", ["stem", "lines", "parsed"], f["details"]["legs"])


def _section_cost(f: dict[str, Any]) -> list[str]:
    return _rows("| leg | calls | prompt tokens | model $ | search $ | report $ | supported claims | $ per supported "
                 "claim |", ["stem", "calls", "prompt_tokens", "model_usd", "search_usd", "usd", "supported_claims",
                             "usd_per_supported_claim"], f["details"]["legs"])


def _with_main(section: Any) -> Any:
    """A section preceded by the same figure measured on main (issue 32's BEFORE)."""
    def render(f: dict[str, Any]) -> list[str]:
        before = f["details"].get("main")
        head = [f"Before (main, the same harness): {before}.", ""] if isinstance(before, str) else []
        return [*head, *section(f)]
    return render


SECTIONS = {"leg_evidence_at_write": _with_main(_section_evidence), "leg_planted_recall": _with_main(_section_recall),
            "leg_snippets_coverage": _with_main(_section_coverage), "leg_searching": _section_searching,
            "leg_recommendations": _with_main(_section_recommendations), "leg_cost": _with_main(_section_cost)}
