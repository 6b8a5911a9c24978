"""The research leg on a real model, before and after a prompt change: the figures of issue 32 from real reports.

The offline fakes show that the mechanisms work (docs/PERFORMANCE.md, L1-L6); only a real model shows whether
it follows the plan, answers the gap check, writes recommendations in the contract's form and cites what
it read. This script runs the reference review's five topics on ONE model with two versions of the product
(`--before` and `--after`: git refs, or `.` for this checkout as it is), then prints, per version and topic,
the figures `scripts/dev/leg_figures.py` computes from the reports, their evidence files and the writing
call in the trace:

    evidence at write   share of the cited sources' shown passages present in the writing request
    snippet-only        cited sources never read in full / cited sources
    brief coverage      brief items with a cited sentence carrying their words / brief items
    rec. structure      Recommendations lines in the contract's decision or rejected-option form / lines
    calls, prompt tokens, $ model, $ search   from the call log and the front matter

Usage (a maintainer, with real keys in the environment — OPENROUTER_API_KEY and TAVILY_API_KEY, as for
`research-dispatch research`; it spends real money: five legs per version, each within its topic's budget):

    .venv/bin/python scripts/dev/real_check.py --model anthropic/claude-sonnet-4.6 --before main --after .
    .venv/bin/python scripts/dev/real_check.py --model openai/gpt-5 --before v0.4.0 --after my-branch \\
        --topics diloco-family,verl-trl --json build/real-check.json

`--fake` runs the same against the offline fakes instead (no key, no money: the figures then describe the
scripted model, as the benchmark does) — that is how tests/test_leg_figures.py checks this script.

Each version runs from its own copy of the product (`git archive <ref> scripts`, imported with PYTHONPATH;
`.` uses this checkout), in a scratch repository holding this checkout's topics with their model replaced by
`--model`, through `python -m research_dispatch research` — the CLI as users run it. A version older than
the dossier write traces no writing call: its evidence at write is shown as `—` (unknown), not 0.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import leg_figures as lf  # scripts/dev is not a package

ROOT = Path(__file__).resolve().parents[2]
CYCLE = "2026-H2"


@dataclass(frozen=True)
class Row:
    version: str
    stem: str
    status: str
    calls: int
    prompt_tokens: int
    model_usd: float
    search_usd: float
    evidence: float | None
    snippet_only: float | None
    coverage: float | None
    structure: float | None


def scratch_repo(base: Path, model: str, topics: list[str] | None) -> Path:
    """A repository with this checkout's topics (or those named), each routed to `model` alone."""
    repo = base / "repo"
    (repo / "topics").mkdir(parents=True)
    for path in sorted((ROOT / "topics").glob("*.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        if topics and data["id"] not in topics:
            continue
        data["models"] = [{"model": model, "rationale": "real-model check"}]
        (repo / "topics" / path.name).write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    (repo / "pyproject.toml").write_text("[tool.research-dispatch]\n", encoding="utf-8")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    return repo


def product(ref: str, into: Path) -> Path:
    """The `scripts` folder of version `ref`: this checkout's for `.`, else `git archive <ref> scripts`."""
    if ref == ".":
        return ROOT / "scripts"
    into.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref, "scripts"], check=True, capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into / "scripts"


def run_version(label: str, ref: str, model: str, topics: list[str] | None, env: Mapping[str, str],
                base: Path) -> list[Row]:
    work = base / label
    repo = scratch_repo(work, model, topics)
    scripts = product(ref, work / "product")
    stems = sorted(p.stem for p in (repo / "topics").glob("*.yaml"))
    child = {**env, "PYTHONPATH": str(scripts), "RESEARCH_DISPATCH_CYCLE": CYCLE}
    rows = []
    for stem in stems:
        topic_id = yaml.safe_load((repo / "topics" / f"{stem}.yaml").read_text(encoding="utf-8"))["id"]
        done = subprocess.run([sys.executable, "-m", "research_dispatch", "research", topic_id, "--repo", str(repo)],
                              env=child, capture_output=True, text=True)
        print(f"  {label} {stem}: exit {done.returncode}", file=sys.stderr)
        rows.append(measure(label, repo, stem))
    return rows


def measure(label: str, repo: Path, stem: str) -> Row:
    """The figures of one leg from its files (report, evidence, call log, trace); zeros when it failed."""
    report = repo / "research" / f"{stem}.md"
    status = json.loads((repo / "build" / "legs" / f"{stem}.json").read_text(encoding="utf-8"))
    calls = [json.loads(line) for line in (repo / "research" / f"{stem}.calls.jsonl").read_text().splitlines()] \
        if (repo / "research" / f"{stem}.calls.jsonl").exists() else []
    if not report.exists():
        return Row(label, stem, status.get("status", "failed"), status.get("calls", 0), 0, status.get("cost_usd", 0.0),
                   0.0, None, None, None, None)
    text = report.read_text(encoding="utf-8")
    _, front, body = text.split("---\n", 2)
    meta = yaml.safe_load(front)
    topic = yaml.safe_load((repo / "topics" / f"{stem}.yaml").read_text(encoding="utf-8"))
    facts = lf.LegFacts(stem=stem, topic=meta["topic"], scope=topic["scope"], body=body,
                        cited_urls=tuple(s["url"] for s in meta["sources"]),
                        evidence=lf.read_evidence(repo / "research" / f"{stem}.evidence.jsonl"),
                        write_request=lf.write_request_from_trace(repo / "build" / "traces" / f"{stem}.jsonl"))
    present, shown = lf.evidence_at_write(facts)
    snippets, cited = lf.snippet_only(facts)
    items = lf.brief_items(facts.scope)
    parsed, lines = lf.recommendation_structure(body)
    return Row(label, stem, meta["status"], len(calls), sum(int(c["prompt_tokens"]) for c in calls),
               float(meta["usage"]["cost_usd"]), float((meta.get("search") or {}).get("cost_usd") or 0.0),
               lf.ratio(present, shown) if facts.write_request is not None else None, lf.ratio(snippets, cited),
               lf.ratio(sum(lf.covered(items, body)), len(items)), lf.ratio(parsed, lines))


def table(rows: list[Row]) -> str:
    def pct(value: float | None) -> str:
        return "—" if value is None else f"{value:.0%}"

    head = ("version", "leg", "status", "calls", "prompt tok", "$ model", "$ search", "evid@write", "snippet-only",
            "coverage", "rec. form")
    out = [head]
    for r in rows:
        out.append((r.version, r.stem, r.status, str(r.calls), f"{r.prompt_tokens:,}", f"{r.model_usd:.4f}",
                    f"{r.search_usd:.4f}", pct(r.evidence), pct(r.snippet_only), pct(r.coverage), pct(r.structure)))
    widths = [max(len(row[i]) for row in out) for i in range(len(head))]
    return "\n".join("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in out)


@contextmanager
def fakes() -> Iterator[dict[str, str]]:
    """The offline fakes in this process: the environment a leg needs to use them."""
    from research_dispatch_fakes.gateway import FakeGateway
    from research_dispatch_fakes.tavily import FakeTavily

    with FakeGateway() as gateway, FakeTavily() as tavily:
        yield {"OPENROUTER_API_KEY": "sk-or-real-check-fake", "TAVILY_API_KEY": "tvly-real-check-fake",
               "OPENROUTER_BASE_URL": gateway.base_url, "TAVILY_BASE_URL": tavily.base_url}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="the OpenRouter slug every topic is routed to")
    parser.add_argument("--before", required=True, help="git ref of the version before the change, or '.'")
    parser.add_argument("--after", required=True, help="git ref of the version after the change, or '.'")
    parser.add_argument("--topics", default="", help="comma-separated topic ids (default: all five)")
    parser.add_argument("--fake", action="store_true", help="against the offline fakes (no key, no money)")
    parser.add_argument("--json", type=Path, help="also write the rows as JSON to this file")
    parser.add_argument("--keep", type=Path, help="keep the scratch repositories under this folder")
    args = parser.parse_args(argv)
    if not re.fullmatch(r"[a-z0-9][a-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._:-]*", args.model):
        parser.error(f"--model: {args.model!r} is not a model slug (author/name)")
    topics = [t.strip() for t in args.topics.split(",") if t.strip()] or None
    base = Path(tempfile.mkdtemp(prefix="real-check-")) if args.keep is None else args.keep
    rows: list[Row] = []
    try:
        with fakes() if args.fake else contextlib.nullcontext({}) as env:  # real services: the environment
            for label, ref in (("before", args.before), ("after", args.after)):
                rows += run_version(label, ref, args.model, topics, {**os.environ, **env}, base)
    finally:
        if args.keep is None:
            shutil.rmtree(base, ignore_errors=True)
    print(table(rows))
    if args.json is not None:
        args.json.write_text(json.dumps([r.__dict__ for r in rows], indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return 0 if all(r.status != "failed" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
