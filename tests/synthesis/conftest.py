"""Fixtures for the synthesis tests: hand-built reports with a known claim structure.

Reports are real report files (front matter rendered by `report.render_report`, a consistent call log
next to each, so `verify` re-checks their routes from evidence) whose bodies carry statements from the
fake corpus's planted claims bank. The fake gateway's extraction behaviour finds those statements, so
the structure of the synthesis is known in advance.

Where the extractor's output itself matters (the scenarios of issue 12), a test scripts it: the fake
gateway answers one report's extraction call with a chosen structured answer (`scripted_extraction`, a
`answer` rule matched by the report's session), and the real `synthesize` command runs against it, as a
user types it, in process (`synthesize_cli`, tests/clirun.py). The judge is the fake's, which follows
the prompt: it groups recommendations by the decision the extractor says they answer.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from research_dispatch.config.settings import Settings, load_settings
from research_dispatch.gateway.provenance import CallRecord
from research_dispatch.leg.report import CitedSource, ReportMeta, SourceEntry, Usage, load_report, render_report
from research_dispatch.synthesis import SynthesisResult, synthesize
from research_dispatch_fakes.script_synthesis import bank
from tests.clirun import CliRun, run_cli
from tests.conftest import CANARY, ROOT

CYCLE = "2026-H2"
SOURCES = [
    ("https://arxiv.org/abs/2409.19256", "HybridFlow: a flexible and efficient RLHF framework"),
    ("https://www.primeintellect.ai/blog/intellect-2", "INTELLECT-2"),
    ("https://github.com/meta-pytorch/openenv", "meta-pytorch/OpenEnv"),
    ("https://github.com/meta-pytorch/monarch", "meta-pytorch/monarch"),
]
FILLER = "This paragraph gives context without making a claim of its own"


def statement(claim_id: str, topic: str) -> str:
    """A planted statement of the bank: claim `claim_id` as the report on `topic` words it."""
    entry = next(e for e in bank() if e["id"] == claim_id)
    return entry["by_topic"][topic]["statement"]


def write_report(repo: Path, stem: str, model: str, sentences: list[str], *, route: str = "exact",
                 call_log: bool = True, cycle: str = CYCLE, status: str = "ok", title: str | None = None,
                 served: str | None = None, route_verified: bool | None = None,
                 status_reasons: list[str] | None = None, topic: str | None = None, evidence: bool = True) -> Path:
    """A report whose body cites one source per sentence, with a call log consistent with `route`, and an
    evidence file in which each cited source's passage states the sentence that cites it (so the fake
    citation judge finds it supported).

    `served` is the model that answered (default: the requested one, or `<model>-substitute` for a
    model fallback); `route_verified` overrides the front matter's flag (default: route is exact).
    """
    sources = cited_sources()
    body = report_body(title or stem, sentences)
    served = served or (model if route != "model_fallback" else model + "-substitute")
    verdict = route
    record = CallRecord(
        generation_id=f"gen-{stem}", requested_model=model, requested_provider=None, served_model=served,
        served_provider="Provider", metadata_present=True, attempt=1, attempts_recorded=1, strategy="direct",
        cached=False, finish_reason="stop", native_finish_reason="stop", prompt_tokens=100, completion_tokens=100,
        cached_tokens=0, reasoning_tokens=0, cost_usd=0.001, latency_s=0.1, retries=0, purpose="research",
        verdict=verdict)
    meta = ReportMeta(
        topic=topic or stem.split(".")[0].split("-", 1)[1], title=title or stem, requested_model=model,
        family=model.split("/")[0], served_models=[served], served_providers=["Provider"], route=route,
        route_verified=route == "exact" if route_verified is None else route_verified, calls=1,
        generation_ids=[record.generation_id or ""], status=status, status_reasons=list(status_reasons or []),
        words=len(body.split()), usage=Usage(), sources=[SourceEntry(**s.as_dict()) for s in sources],
        started_at="2026-07-01T00:00:00Z", finished_at="2026-07-01T00:01:00Z", cycle=cycle,
        rationale=f"rationale of {stem}")
    path = repo / "research" / f"{stem}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_report(meta, body, sources), encoding="utf-8")
    if call_log:
        (repo / "research" / f"{stem}.calls.jsonl").write_text(record.to_json() + "\n", encoding="utf-8")
    if evidence:
        write_sentence_evidence(repo, stem, sentences)
    return path


def cited_sources() -> list[CitedSource]:
    return [CitedSource(id=i + 1, url=url, title=name) for i, (url, name) in enumerate(SOURCES)]


def report_body(title: str, sentences: list[str]) -> str:
    """One paragraph per sentence under `## Findings`, sentence i citing source i mod 4 + 1."""
    paragraphs = [f"{sentence} [{index % len(SOURCES) + 1}]. {FILLER}." for index, sentence in enumerate(sentences)]
    return f"# {title}\n\n## Findings\n\n" + "\n\n".join(paragraphs) + "\n"


def write_sentence_evidence(repo: Path, stem: str, sentences: list[str]) -> Path:
    """The evidence of `report_body`: each sentence is the passage of the source it cites."""
    return write_evidence(repo, stem, [(SOURCES[index % len(SOURCES)][0], f"{sentence}.")
                                       for index, sentence in enumerate(sentences)])


def say(repo: Path, stem: str, sentences: list[str]) -> None:
    """Rewrite an existing report's body (and evidence) to say exactly these sentences, its front matter
    otherwise unchanged: what a scripted extraction quotes is then in the report, as a real one's is."""
    path = repo / "research" / f"{stem}.md"
    report = load_report(path, repo=repo)
    body = report_body(report.meta.title, list(dict.fromkeys(sentences)))
    meta = report.meta.model_copy(update={"words": len(body.split())})
    path.write_text(render_report(meta, body, cited_sources()), encoding="utf-8")
    if (repo / "research" / f"{stem}.evidence.jsonl").exists():
        write_sentence_evidence(repo, stem, list(dict.fromkeys(sentences)))


def evidence_line(url: str, text: str, *, tool: str = "web_extract") -> dict[str, str]:
    title = dict(SOURCES).get(url, url)
    return {"url": url, "title": title, "tool": tool, "text": text,
            "sha256": hashlib.sha256(text.encode("utf-8")).hexdigest()}


def write_evidence(repo: Path, stem: str, passages: list[tuple[str, str]]) -> Path:
    """`research/<stem>.evidence.jsonl` with one passage per (url, text), in the FIXED shape and order, and
    the report beside it bound to it (its `evidence_sha256`), as a leg writes the two: evidence the report
    does not name is no evidence to the synthesis."""
    lines = sorted((evidence_line(url, text) for url, text in passages), key=lambda d: (d["url"], d["sha256"]))
    path = repo / "research" / f"{stem}.evidence.jsonl"
    text = "".join(json.dumps(line, sort_keys=True) + "\n" for line in lines)
    path.write_text(text, encoding="utf-8")
    bind_evidence(repo / "research" / f"{stem}.md", hashlib.sha256(text.encode("utf-8")).hexdigest())
    return path


def bind_evidence(report: Path, sha256: str) -> None:
    """Set the report's `evidence_sha256` (front matter only: the body and its hash are unchanged)."""
    if not report.exists():
        return
    text = report.read_text(encoding="utf-8")
    front, body = text[len("---\n"):].split("\n---\n", 1)
    kept = [line for line in front.split("\n") if not line.startswith("evidence_sha256:")]
    report.write_text("---\n" + "\n".join([*kept, f"evidence_sha256: {sha256}"]) + "\n---\n" + body,
                      encoding="utf-8")


GENERIC = "The Epsilon benchmark suite measures long-horizon agent reliability across forty tasks"

# stem -> (model, statements, route)
PLANTED: dict[str, tuple[str, list[str], str]] = {
    "01-alpha": ("deepseek/deepseek-v4-pro", [
        statement("rl-algorithm-grpo", "diloco-family"),
        statement("decentralised-substrate-prime-rl", "diloco-family"),
        statement("pretraining-streaming-diloco", "diloco-family"),
    ], "exact"),
    "02-beta": ("anthropic/claude-sonnet-4.6", [  # GRPO cites another page than 01-alpha's: two sources
        statement("orchestration-ray", "verl-trl"),
        statement("rl-algorithm-grpo", "verl-trl"),
    ], "exact"),
    "03-gamma.openai-gpt-5": ("openai/gpt-5", [
        statement("orchestration-monarch", "monarch-torchforge-openenv"),
        statement("environment-format-openenv", "monarch-torchforge-openenv"),
    ], "exact"),
    "03-gamma.openai-gpt-5-mini": ("openai/gpt-5-mini", [
        statement("environment-format-openenv", "verl-trl"),
    ], "exact"),
    "05-delta": ("moonshotai/kimi-k2-thinking", [
        statement("decentralised-substrate-prime-rl", "verl-trl"),
        statement("distillation-trace-replay", "trace-replay-distillation"),
    ], "model_fallback"),
    "06-epsilon": ("google/gemini-3.1-pro-preview", [
        statement("base-model-kimi-k2", "composer-2.5"),
        GENERIC,
    ], "exact"),
}


def write_pyproject(repo: Path, extra: str = "",
                    judges: tuple[str, ...] = ("qwen/qwen3-max", "anthropic/claude-sonnet-4.6")) -> None:
    """Settings of the planted repository: no back-off sleeps, and a judge of no author's family."""
    (repo / "pyproject.toml").write_text(
        '[tool.research-dispatch]\nframework_name = "planted"\n'
        'gateway = {backoff_base_s = 0.0, backoff_max_s = 0.0, max_retries = 1}\n'
        f"synthesis = {{judge_models = {json.dumps(list(judges))}{extra}}}\n",
        encoding="utf-8")


@pytest.fixture
def planted(tmp_path: Path) -> Path:
    """A repository (no topics) with the six planted reports."""
    repo = tmp_path / "planted"
    repo.mkdir()
    write_pyproject(repo)
    for stem, (model, sentences, route) in PLANTED.items():
        write_report(repo, stem, model, sentences, route=route)
    return repo


@pytest.fixture
def synth_env(gateway: Any) -> dict[str, str]:
    """Only what the synthesis needs: the gateway key and base URL (no search key)."""
    return {"OPENROUTER_API_KEY": CANARY["OPENROUTER_API_KEY"], "OPENROUTER_BASE_URL": gateway.base_url}


@pytest.fixture
def run_synthesis(synth_env: dict[str, str]) -> Callable[..., SynthesisResult]:
    def run(repo: Path, settings: Settings | None = None, **kwargs: Any) -> SynthesisResult:
        return synthesize(repo, settings or load_settings(repo), env=kwargs.pop("env", synth_env),
                          cycle=kwargs.pop("cycle", CYCLE), **kwargs)
    return run


def ledger(repo: Path) -> dict[str, Any]:
    return json.loads((repo / "framework" / "claims.json").read_text(encoding="utf-8"))


def statuses(data: dict[str, Any]) -> dict[str, str]:
    return {c["key"]: c["status"] for c in data["clusters"]}


def structured_calls(gateway: Any, schema: str) -> list[dict[str, Any]]:
    """The fake's completion records for one structured-output schema."""
    out = []
    for record in gateway.completions:
        response_format = record["request"].get("response_format") or {}
        if (response_format.get("json_schema") or {}).get("name") == schema:
            out.append(record)
    return out


def synthesize_cli(repo: Path, env: dict[str, str], *args: str) -> CliRun:
    """`research-dispatch synthesize` as a user runs it, with the given environment only."""
    base = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", ""),
            "NO_PROXY": "127.0.0.1,localhost", "PYTHONPATH": str(ROOT / "scripts")}
    return run_cli("synthesize", "--repo", str(repo), "--cycle", CYCLE, *args, env={**base, **env})


def claim_json(statement_text: str, layer: str, *, stance: str = "describe", decision: str | None = None,
               pick: str | None = None, condition: str | None = None, sources: list[int] | None = None,
               confidence: str = "medium", position: str = "for", quote: str | None = None,
               section: str | None = None) -> dict[str, Any]:
    """One claim as the extractor returns it (the extraction schema's fields); the quote is the statement
    unless given."""
    return {"statement": statement_text, "layer": layer, "stance": stance, "decision": decision, "pick": pick,
            "alternatives": [], "condition": condition, "position": position,
            "quote": quote if quote is not None else statement_text, "section": section,
            "sources": sources if sources is not None else [1], "confidence": confidence}


def scripted_extraction(stem: str, claims: list[dict[str, Any]], model: str = "openai/gpt-5-mini") -> dict[str, Any]:
    """A fake-gateway rule: the extraction call for report `stem` answers exactly `claims`.

    The answer is a complete chat completion (HTTP 200, the gateway's wire format) served for the
    report's extraction session, so everything else about the call is real.
    """
    content = json.dumps({"claims": claims})
    body = {"id": f"gen-scripted-{stem}", "object": "chat.completion", "created": 1767225600, "model": model,
            "provider": "OpenAI",
            "choices": [{"index": 0, "finish_reason": "stop", "native_finish_reason": "stop",
                         "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 50, "total_tokens": 150, "cost": 0.0001}}
    return {"match": {"schema": "claim_extraction", "session": f"*:synthesis:{stem}"}, "answer": body}


def scenario_repo(tmp_path: Path, name: str, reports: dict[str, tuple[str, str]], extra: str = "") -> Path:
    """A repository (no topics) of one-paragraph reports: stem -> (model, route)."""
    repo = tmp_path / name
    repo.mkdir()
    write_pyproject(repo, extra)
    for stem, (model, route) in reports.items():
        write_report(repo, stem, model, [f"The report {stem} states its findings with a citation"], route=route)
    return repo
