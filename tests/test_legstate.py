"""The one leg-state rule (`leg/state`): which report stands for a leg, and the leg's state.

Pure logic over real report texts (rendered by `report.render_report`, with consistent call logs), so
these are unit tests of the rule; the end-to-end consequences are in tests/reliability/
(test_never_lose_work.py, test_refresh_rules.py).
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from research_dispatch.config.plan import Leg, plan_legs
from research_dispatch.config.settings import load_settings
from research_dispatch.config.topics import load_topics
from research_dispatch.gateway.provenance import CallRecord
from research_dispatch.leg.evidence import EvidenceLine, sha256_text
from research_dispatch.leg.report import CitedSource, ReportMeta, SourceEntry, Usage, render_report
from research_dispatch.leg.standing import Candidate, Where, assess, choose, read_candidate
from research_dispatch.leg.status import LegResult, LegState
from research_dispatch.publish.accumulate import Accumulation, apply_overlay
from tests.profiles import examples

CYCLE = "2026-H2"
HASH = "inputs-now"


@pytest.fixture
def setup(repo: Path) -> tuple[object, Leg]:
    settings = load_settings(repo)
    leg = next(leg for leg in plan_legs(load_topics(repo, settings), settings) if leg.stem == "02-diloco-family")
    return settings, leg


def make(setup: tuple[object, Leg], *, finished: str = "2026-07-02T10:00:00Z", status: str = "ok",
         served: str | None = None, cycle: str = CYCLE, input_hash: str = HASH, edited: bool = False,
         where: Where = Where.BRANCH, note: str = "") -> Candidate:
    settings, leg = setup
    model = leg.route.model
    record = CallRecord(
        generation_id=f"gen-{finished}-{note}", requested_model=model, requested_provider=None,
        served_model=served or model, served_provider="DeepSeek", metadata_present=True, attempt=1,
        attempts_recorded=1, strategy="direct", cached=False, finish_reason="stop", native_finish_reason="stop",
        prompt_tokens=10, completion_tokens=10, cached_tokens=0, reasoning_tokens=0, cost_usd=0.01, latency_s=0.1,
        retries=0, purpose="research", verdict="exact" if served is None else "model_fallback")
    meta = ReportMeta(
        topic=leg.topic.id, title=leg.topic.title, requested_model=model, family=leg.family,
        served_models=[record.served_model], served_providers=["DeepSeek"],
        route="exact" if served is None else "model_fallback", route_verified=served is None, calls=1,
        generation_ids=[record.generation_id], status=status, words=2100, usage=Usage(cost_usd=0.01),
        sources=[SourceEntry(id=1, url="https://arxiv.org/abs/2311.08105", title="DiLoCo")],
        started_at=finished.replace("10:00", "09:59"), finished_at=finished, cycle=cycle, input_hash=input_hash,
        schema="research-dispatch/report@1")
    text = render_report(meta, f"# DiLoCo\n\nBody {note} [1].\n",
                         [CitedSource(id=1, url="https://arxiv.org/abs/2311.08105", title="DiLoCo")])
    if edited:
        text = text.replace("[1].\n", "[1]. A sentence a reviewer added.\n", 1)
    return read_candidate(leg, settings, where=where, text=text, calls_text=record.to_json() + "\n")


def test_the_newest_good_report_wins_and_an_older_or_worse_one_never_replaces_it(setup) -> None:
    old = make(setup, finished="2026-07-01T10:00:00Z", note="old")
    new = make(setup, finished="2026-07-03T10:00:00Z", note="new")
    assert choose([old, new], cycle=CYCLE, input_hash=HASH) is new
    degraded = make(setup, finished="2026-07-04T10:00:00Z", status="degraded", note="degraded")
    assert choose([new, degraded], cycle=CYCLE, input_hash=HASH) is new  # never downgraded
    fallback = make(setup, finished="2026-07-04T10:00:00Z", served="deepseek/deepseek-v3", note="fallback")
    assert choose([new, fallback], cycle=CYCLE, input_hash=HASH) is new  # a verified route beats a newer guess
    stale_inputs = make(setup, finished="2026-07-05T10:00:00Z", input_hash="inputs-before", note="stale")
    assert choose([new, stale_inputs], cycle=CYCLE, input_hash=HASH) is new  # the current inputs win
    other_cycle = make(setup, finished="2026-08-01T10:00:00Z", cycle="2026-H1", note="h1")
    assert choose([other_cycle], cycle=CYCLE, input_hash=HASH) is None  # not a report of this cycle


def test_a_hand_edit_wins_unless_fresh_replaces_it(setup) -> None:
    edit = make(setup, finished="2026-07-01T10:00:00Z", edited=True, where=Where.WORKTREE, note="e")
    assert edit.edited
    newer = make(setup, finished="2026-07-03T10:00:00Z", note="n")
    assert choose([edit, newer], cycle=CYCLE, input_hash=HASH) is edit
    assert choose([edit, newer], cycle=CYCLE, input_hash=HASH, replace_edited=True) is newer


def test_a_tie_in_time_prefers_the_working_tree_then_the_content_hash(setup) -> None:
    branch = make(setup, note="branch")
    worktree = make(setup, note="worktree", where=Where.WORKTREE)
    assert choose([branch, worktree], cycle=CYCLE, input_hash=HASH) is worktree
    twin = make(setup, note="twin")
    assert choose([branch, twin], cycle=CYCLE, input_hash=HASH) is choose([twin, branch], cycle=CYCLE,
                                                                         input_hash=HASH)


def test_states_from_reports_and_status_files(setup) -> None:
    _, leg = setup
    good = make(setup)
    assert assess(leg, [good], None, cycle=CYCLE, input_hash=HASH).state is LegState.OK
    assert assess(leg, [make(setup, status="degraded")], None, cycle=CYCLE, input_hash=HASH).state \
        is LegState.DEGRADED
    assert assess(leg, [make(setup, served="x/y")], None, cycle=CYCLE, input_hash=HASH).state is LegState.UNVERIFIED
    assert assess(leg, [make(setup, edited=True)], None, cycle=CYCLE, input_hash=HASH).state is LegState.EDITED
    assert assess(leg, [make(setup, cycle="2026-H1")], None, cycle=CYCLE, input_hash=HASH).state is LegState.STALE
    assert assess(leg, [], None, cycle=CYCLE, input_hash=HASH).state is LegState.MISSING
    failed = LegResult(stem=leg.stem, topic=leg.topic.id, model=leg.route.model, family=leg.family,
                       status=LegState.FAILED, cycle=CYCLE, started_at="2026-07-09T00:00:00Z", cost_usd=0.5,
                       error="gateway HTTP 402")
    after_failure = assess(leg, [], failed, cycle=CYCLE, input_hash=HASH)
    assert after_failure.state is LegState.FAILED and after_failure.cost_usd == 0.5
    kept = assess(leg, [good], failed, cycle=CYCLE, input_hash=HASH)
    assert kept.state is LegState.OK and kept.last_attempt_failed  # the good report stands; the failure is said
    assert kept.cost_usd == round(good.cost_usd + 0.5, 6)  # and its money counts
    other_cycle_failure = LegResult(**{**failed.__dict__, "cycle": "2026-H1"})
    assert assess(leg, [], other_cycle_failure, cycle=CYCLE, input_hash=HASH).state is LegState.MISSING
    settings, _ = setup
    foreign = read_candidate(leg, settings, where=Where.WORKTREE, text=good.text.replace(
        "topic: diloco-family", "topic: verl-trl"), calls_text=good.calls_text)
    assert assess(leg, [foreign], None, cycle=CYCLE, input_hash=HASH).state is LegState.INVALID
    complete = {s for s in LegState if s.complete}
    assert complete == {LegState.OK, LegState.DEGRADED, LegState.EDITED}


@settings(max_examples=examples(40), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # read-only
@given(st.lists(st.tuples(st.integers(1, 9), st.sampled_from(["ok", "degraded"]), st.booleans(), st.booleans()),
                min_size=1, max_size=6), st.randoms())
def test_the_choice_is_a_function_of_the_candidates_not_their_order(setup, reports, rnd: random.Random) -> None:
    pool = [make(setup, finished=f"2026-07-0{day}T10:00:00Z", status=status,
                 served=None if verified else "x/other", where=Where.WORKTREE if here else Where.BRANCH,
                 note=str(i)) for i, (day, status, verified, here) in enumerate(reports)]
    chosen = choose(pool, cycle=CYCLE, input_hash=HASH)
    shuffled = list(pool)
    rnd.shuffle(shuffled)
    again = choose(shuffled, cycle=CYCLE, input_hash=HASH)
    assert chosen is not None and again is not None and chosen.text == again.text
    assert all(not (c.route_verified and not chosen.route_verified) for c in pool)  # never a worse route


def test_a_report_without_evidence_stands_for_its_leg_and_the_assessment_says_so(setup) -> None:
    """An older report (no evidence file, no `evidence_sha256`) is as good as it was: same state, same
    choice; what is missing is a warning, never a reason (reasons list what makes a leg incomplete)."""
    settings, leg = setup
    older = make(setup, note="older")
    assessed = assess(leg, [older], None, cycle=CYCLE, input_hash=HASH)
    assert assessed.state is LegState.OK and assessed.chosen is older and assessed.reasons == []
    assert assessed.warnings == [f"no evidence file ({leg.evidence_relpath(settings)}): the report predates "
                                 "evidence files, so its citations cannot be checked"]
    line = EvidenceLine.of("https://arxiv.org/abs/2311.08105", "DiLoCo", "web_extract", "DiLoCo averages deltas.")
    bound = make(setup, note="bound")
    text = bound.text.replace("\nstarted_at:", f"\nevidence_sha256: {sha256_text(line.to_json() + chr(10))}\n"
                              "started_at:", 1)
    with_file = read_candidate(leg, settings, where=Where.WORKTREE, text=text, calls_text=bound.calls_text,
                               evidence_text=line.to_json() + "\n")
    assert assess(leg, [with_file], None, cycle=CYCLE, input_hash=HASH).warnings == []
    lost = read_candidate(leg, settings, where=Where.WORKTREE, text=text, calls_text=bound.calls_text)
    assessed = assess(leg, [lost], None, cycle=CYCLE, input_hash=HASH)
    assert assessed.state is LegState.OK and assessed.warnings == [f"{leg.evidence_relpath(settings)} is missing"]
    assert with_file.unit(leg, settings)[1].relpath == leg.evidence_relpath(settings)  # it travels with the report
    assert [w.relpath for w in lost.unit(leg, settings)] == [leg.calls_relpath(settings), leg.report_relpath(settings)]


def test_the_overlay_brings_the_branch_report_with_its_companions_and_drops_a_stale_one(repo: Path, setup) -> None:
    """The branch's report replaces the working tree's as one unit; an evidence file the branch report
    does not have is removed, never left to pass for the new report's (an older report on the branch)."""
    settings, leg = setup
    local = make(setup, finished="2026-07-01T10:00:00Z", where=Where.WORKTREE, note="local")
    for write in local.unit(leg, settings):
        (repo / write.relpath).parent.mkdir(parents=True, exist_ok=True)
        (repo / write.relpath).write_text(write.text, encoding="utf-8")
    (repo / leg.evidence_relpath(settings)).write_text("{}\n", encoding="utf-8")
    branch = make(setup, finished="2026-07-03T10:00:00Z", note="branch")  # no evidence file
    assessed = assess(leg, [local, branch], None, cycle=CYCLE, input_hash=HASH)
    assert assessed.chosen is branch
    result = apply_overlay(repo, settings, Accumulation(cycle=CYCLE, legs=[assessed]), move_unplanned=False)
    assert result.brought == [branch.relpath] and result.problems == []
    assert (repo / leg.report_relpath(settings)).read_text(encoding="utf-8") == branch.text
    assert (repo / leg.calls_relpath(settings)).read_text(encoding="utf-8") == branch.calls_text
    assert not (repo / leg.evidence_relpath(settings)).exists()
    assert (repo / settings.build_dir / "replaced" / f"{leg.stem}.md").read_text(encoding="utf-8") == local.text
