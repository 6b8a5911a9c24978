"""Helpers for the reliability suite: fault cases run through the real clients against the fakes.

Every case runs the product's own leg code (`run_leg`, or the CLI) with the real `openai` and
`tavily-python` clients over HTTP against the fake servers, then asserts the *outcome*: the leg's
status and reasons (status file and report front matter), the number of calls each fake saw, and
that a previous good report was left intact. Faults on the gateway are scoped to one leg (a rule's
`match.session`), and a second leg runs in the same process to show it is unaffected.

Nothing here sleeps or measures time: retries run with zero back-off (config), time caps use an
injected clock, and timeouts pair a small client timeout with a much larger fake delay.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from research_dispatch.config.plan import plan_legs
from research_dispatch.config.settings import load_settings
from research_dispatch.config.topics import load_topics
from research_dispatch.core.retry import RetryPolicy
from research_dispatch.leg.execute import run_leg
from research_dispatch.leg.status import LegResult


@dataclass(frozen=True)
class LegRef:
    stem: str
    topic: str
    model: str

    @property
    def session(self) -> str:
        return f"2026-H2:{self.stem}"


TARGET = LegRef("02-diloco-family", "diloco-family", "deepseek/deepseek-v4-pro")  # the leg a fault hits
CONTROL = LegRef("04-verl-trl", "verl-trl", "anthropic/claude-sonnet-4.6")  # a leg that must not notice
CYCLE = "2026-H2"


def on_target(**rule: Any) -> dict[str, Any]:
    """A fake-gateway rule that only fires on the target leg's calls (matched by session id)."""
    match = dict(rule.pop("match", {}))
    match["session"] = f"*:{TARGET.stem}"
    return {"match": match, **rule}


def configure(repo: Path, *, gateway: str = "", search_service: str = "", extra: str = "") -> None:
    """pyproject settings with zero back-off for both services (no sleeps), plus any overrides."""
    gateway_items = ", ".join(x for x in ("backoff_base_s = 0.0", "backoff_max_s = 0.0", gateway) if x)
    search_items = ", ".join(x for x in ("backoff_base_s = 0.0", "backoff_max_s = 0.0", search_service) if x)
    (repo / "pyproject.toml").write_text(
        "[tool.research-dispatch]\n"
        'framework_name = "composer-replication-framework"\n'
        f"gateway = {{{gateway_items}}}\n"
        f"search_service = {{{search_items}}}\n" + extra, encoding="utf-8")


def set_topic_budget(repo: Path, ref: LegRef, budget: str) -> None:
    path = next((repo / "topics").glob(f"*-{ref.topic}.yaml"))
    path.write_text(path.read_text(encoding="utf-8") + f"budget: {budget}\n", encoding="utf-8")


@dataclass
class LegView:
    """Everything a leg left on disk."""

    stem: str
    status: dict[str, Any]
    text: str | None
    meta: dict[str, Any] | None
    body: str | None
    calls: list[dict[str, Any]]
    trace: list[dict[str, Any]]

    @property
    def reasons(self) -> list[str]:
        return list(self.status.get("reasons") or [])

    def tool_errors(self) -> list[str]:
        return [str((e.get("detail") or {}).get("error")) for e in self.trace
                if e.get("event") == "tool" and e.get("is_error")]


def view(repo: Path, ref: LegRef) -> LegView:
    status = json.loads((repo / "build" / "legs" / f"{ref.stem}.json").read_text(encoding="utf-8"))
    report = repo / "research" / f"{ref.stem}.md"
    text = report.read_text(encoding="utf-8") if report.exists() else None
    meta = body = None
    if text is not None:
        _, front, body = text.split("---\n", 2)
        meta = yaml.safe_load(front)
    calls_path = repo / "research" / f"{ref.stem}.calls.jsonl"
    calls = [json.loads(line) for line in calls_path.read_text(encoding="utf-8").splitlines()] \
        if calls_path.exists() else []
    trace_path = repo / "build" / "traces" / f"{ref.stem}.jsonl"
    trace = [json.loads(line) for line in trace_path.read_text(encoding="utf-8").splitlines()] \
        if trace_path.exists() else []
    return LegView(ref.stem, status, text, meta, body, calls, trace)


def run_legs(repo: Path, env: Mapping[str, str], refs: Iterable[LegRef] = (TARGET, CONTROL), *,
             retry: RetryPolicy | None = None, clock: Callable[[], float] | None = None) -> dict[str, LegResult]:
    """Run legs one after the other in this process, as `research a,b` and the runner do."""
    settings = load_settings(repo)
    wanted = {r.stem for r in refs}
    legs = [leg for leg in plan_legs(load_topics(repo, settings), settings) if leg.stem in wanted]
    return {leg.stem: run_leg(repo, settings, leg, env=env, cycle=CYCLE, retry=retry, clock=clock) for leg in legs}


def assert_clean(repo: Path, ref: LegRef = CONTROL) -> LegView:
    """The leg finished `ok` with an exact route, in band, citing retrieved sources."""
    leg = view(repo, ref)
    assert leg.status["status"] == "ok", leg.status
    assert leg.reasons == [] and leg.status["error"] is None
    assert leg.meta is not None and leg.meta["status"] == "ok" and leg.meta["status_reasons"] == []
    assert leg.meta["route"] == "exact" and 2000 <= leg.meta["words"] <= 2500
    assert len(leg.meta["sources"]) >= 3
    return leg


def seed_previous(repo: Path, env: Mapping[str, str], gateway: Any, tavily: Any) -> str:
    """A previous good report of the target leg; the fakes are reset afterwards (call numbers restart)."""
    run_legs(repo, env, [TARGET])
    text = (repo / "research" / f"{TARGET.stem}.md").read_text(encoding="utf-8")
    assert "status: ok" in text
    gateway.reset()
    tavily.reset()
    return text


def calls_of(gateway: Any, ref: LegRef) -> list[dict[str, Any]]:
    """The fake gateway's records of one leg's completion requests (including failed attempts)."""
    return [c for c in gateway.completions if c["session"] == ref.session]


def tree(root: Path) -> dict[str, str]:
    """Every file under root (relative path -> sha256), symlinks by target: a before/after snapshot."""
    snapshot: dict[str, str] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_symlink():
            snapshot[rel] = "link:" + str(path.readlink())
        elif path.is_file():
            snapshot[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return snapshot


def changed(before: dict[str, str], after: dict[str, str]) -> set[str]:
    return {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}


class Sleeps(list):
    """An injected `sleep` that records the waits instead of waiting."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


class TickClock:
    """An injected monotonic clock that advances `step` seconds each time it is read."""

    def __init__(self, step: float) -> None:
        self.step = step
        self.now = 0.0

    def __call__(self) -> float:
        self.now += self.step
        return self.now


HOSTILE_SERVER = Path(__file__).resolve().parent.parent / "tools" / "hostile_http.py"


@pytest.fixture
def hostile() -> Iterator[Any]:
    """Start hostile HTTP servers (tests/tools/hostile_http.py) in their own processes: `hostile(mode)` is
    the base URL of a new one; all are killed after the test."""
    started: list[subprocess.Popen[str]] = []

    def start(mode: str) -> str:
        process = subprocess.Popen([sys.executable, str(HOSTILE_SERVER), mode], stdout=subprocess.PIPE, text=True)
        started.append(process)
        assert process.stdout is not None
        return f"http://127.0.0.1:{process.stdout.readline().strip()}"

    yield start
    for process in started:
        process.kill()
        process.wait(timeout=30)
