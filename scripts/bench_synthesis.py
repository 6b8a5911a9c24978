"""Synthesis at scale on the offline fakes: LLM calls and wall time for N reports.

    .venv/bin/python scripts/bench_synthesis.py 5 50 300

For each N: the repository's five topics are researched once on the fake gateway and search server;
N reports are then made from them (report i is a variant of topic i mod 5, attributed to one of ten
model families, with some of its planted claims removed so that support varies), each with a call log
consistent with its front matter. The synthesis runs three times on the fake gateway: cold, again
unchanged (everything replayed), and after one report changed. Printed per run: LLM calls (extraction /
judge), claims, judge batches, the bound `reports + ceil(claims / batch_size)`, and wall time.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import shutil
import sys
import tempfile
import time
from pathlib import Path

from research_dispatch.config import load_settings, load_topics
from research_dispatch.fake.gateway import FakeGateway
from research_dispatch.fake.tavily import FakeTavily
from research_dispatch.gateway import CallRecord
from research_dispatch.leg import run_leg
from research_dispatch.plan import plan_legs
from research_dispatch.report import load_report, render_report
from research_dispatch.synthesis import synthesize

ROOT = Path(__file__).resolve().parent.parent
CYCLE = "2026-H2"
KEY = "sk-or-bench-0000000000"
MODELS = ("google/gemini-3.1-pro-preview", "deepseek/deepseek-v4-pro", "openai/gpt-5", "anthropic/claude-sonnet-4.6",
          "moonshotai/kimi-k2-thinking", "x-ai/grok-4", "qwen/qwen3-max", "mistralai/mistral-large",
          "meta-llama/llama-4-maverick", "z-ai/glm-4.6")
JUDGES = '["cohere/command-a", "anthropic/claude-sonnet-4.6"]'


def research_five(base: Path) -> list[Path]:
    """The five real topics researched on the fakes; returns their report paths."""
    shutil.copytree(ROOT / "topics", base / "topics")
    (base / "pyproject.toml").write_text('[tool.research-dispatch]\nframework_name = "bench"\n', encoding="utf-8")
    settings = load_settings(base)
    with FakeGateway() as gateway, FakeTavily() as tavily:
        env = {"OPENROUTER_API_KEY": KEY, "TAVILY_API_KEY": "tvly-bench-000000", "OPENROUTER_BASE_URL":
               gateway.base_url, "TAVILY_BASE_URL": tavily.base_url}
        for leg in plan_legs(load_topics(base, settings), settings):
            run_leg(base, settings, leg, env=env, cycle=CYCLE)
    return sorted((base / "research").glob("*.md"))


def _keep(stem: str, sentence: str) -> bool:
    return int(hashlib.sha256(f"{stem}|{sentence}".encode()).hexdigest(), 16) % 3 != 0


def make_variants(sources: list[Path], base: Path, target: Path, count: int) -> None:
    """`count` reports in target/research, each a variant of one researched report."""
    from research_dispatch.fake.script_synthesis import bank

    planted = [v["statement"] for entry in bank() for v in entry["by_topic"].values()]
    (target / "research").mkdir(parents=True)
    (target / "pyproject.toml").write_text(
        '[tool.research-dispatch]\nframework_name = "bench"\n'
        f"synthesis = {{judge_models = {JUDGES}, concurrency = 8}}\n", encoding="utf-8")
    for i in range(count):
        report = load_report(sources[i % len(sources)], repo=base)
        model = MODELS[(i + i // len(sources)) % len(MODELS)]
        stem = f"{i:03d}-{report.meta.topic}.v{i}"
        body = report.body
        for sentence in planted:
            if sentence in body and not _keep(stem, sentence):
                body = body.replace(sentence, "A statement was left out of this variant")
        body = body.replace("\n## ", f"\nThis is variant {i} of the review.\n\n## ", 1)
        records = [CallRecord.from_dict(json.loads(line)) for line in
                   (report.path.with_name(f"{report.stem}.calls.jsonl")).read_text(encoding="utf-8").splitlines()]
        records = [dataclasses.replace(r, requested_model=model, served_model=model, generation_id=f"gen-{i}-{n}")
                   for n, r in enumerate(records)]
        meta = report.meta.model_copy(update={
            "requested_model": model, "family": model.split("/")[0], "served_models": [model],
            "generation_ids": [r.generation_id for r in records]})
        (target / "research" / f"{stem}.md").write_text(render_report(meta, body, []), encoding="utf-8")
        (target / "research" / f"{stem}.calls.jsonl").write_text("".join(r.to_json() + "\n" for r in records),
                                                                 encoding="utf-8")


def run(target: Path, label: str) -> None:
    settings = load_settings(target)
    with FakeGateway() as gateway:
        env = {"OPENROUTER_API_KEY": KEY, "OPENROUTER_BASE_URL": gateway.base_url}
        started = time.perf_counter()
        result = synthesize(target, settings, env=env, cycle=CYCLE, legs=[])
        elapsed = time.perf_counter() - started
    counts = result.counts
    bound = counts["reports"] + math.ceil(counts["claims"] / settings.synthesis.batch_size)
    clusters = counts["clusters"]
    print(f"  {label:<18} LLM calls {result.llm_calls:>4} (extract {result.extraction_calls:>3}, "
          f"judge {result.judge_calls:>3}) · cached {result.cached_extractions:>3}+{result.cached_judgements:<3} · "
          f"claims {counts['claims']:>5} · batches {counts['batches']:>3} · bound {bound:>4} · "
          f"conv {clusters['convergent']}, div {clusters['divergent']}, single {clusters['single_source']} · "
          f"{elapsed:6.2f} s", flush=True)


def main(sizes: list[int]) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-synthesis-") as tmp:
        base = Path(tmp) / "five"
        base.mkdir()
        sources = research_five(base)
        for count in sizes:
            target = Path(tmp) / f"n{count}"
            make_variants(sources, base, target, count)
            print(f"{count} reports:")
            run(target, "cold")
            run(target, "unchanged re-run")
            changed = sorted((target / "research").glob("*.md"))[count // 2]
            changed.write_text(changed.read_text(encoding="utf-8").replace(
                "## Conclusion", "## Conclusion\n\nOne more sentence changes this report.", 1), encoding="utf-8")
            run(target, "one report changed")


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [5, 50])
