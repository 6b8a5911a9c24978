"""Properties of the classification (issue 12, Build 8), over generated reports, claims and judge answers.

The pure part of the synthesis — `align.assemble` (judge answers → clusters and contradictions) and
`classify.classify` (clusters → classes and divergences) — is exercised with hypothesis: any reports
(counted or excluded, one family, several or none), any claims, any judge answer that passes the
judge schema. Invariants:

* the output is a function of the input: byte-identical whatever the order of claims, groups,
  positions and claim ids;
* a convergent cluster has at least two counted reports of independent families;
* every divergence has at least two sides, each held by counted reports, with disjoint report sets;
  equal support at the top is a tie that reads "no consensus", never "use X today";
* excluded reports never change a counted cluster's class, pick, support or flag, nor a divergence;
* adding a report whose claims the judge relates to no existing claim never changes a cluster's class;
* a divergence side held by one report, and a single-source recommendation or high-confidence claim,
  is flagged;
* and, for the damaged-ledger rule, the claim diff accepts any JSON without raising.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from research_dispatch.config.settings import Settings, SynthesisSettings
from research_dispatch.synthesis.align.judge import (
    Batch,
    Judgement,
    assemble,
    build_batch,
    candidate_components,
    candidate_edges,
    plan_batches,
)
from research_dispatch.synthesis.align.picks import with_aliases
from research_dispatch.synthesis.common.checked import CitationCheck, Position, Support
from research_dispatch.synthesis.common.text import numbers_disagree
from research_dispatch.synthesis.count.classify import classify, independent
from research_dispatch.synthesis.count.counting import counted_claims, supported_urls
from research_dispatch.synthesis.extract.claims import Claim
from research_dispatch.synthesis.read.inputs import Counting
from research_dispatch.synthesis.write.diff import diff_ledgers
from tests.profiles import examples

pytestmark = pytest.mark.slow

FAMILIES = ("a", "b", "c")
PICKS = ("X", "Y", "Z")
URLS = ("https://one.example/", "https://two.example/", "https://three.example/")
FAST = settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])


Group = tuple[str, list[list[str]]]  # a judged group: its relation, and its positions of claim keys


@dataclass(frozen=True)
class Scenario:
    counting: dict[str, Counting]
    claims: list[Claim]
    groups: list[Group]  # batch 1: groups of positions of claim keys
    again: list[Group] = field(default_factory=list)  # batch 2: claims judged again, as anchors


@st.composite
def reports(draw: st.DrawFn, count: int | None = None) -> dict[str, Counting]:
    n = count if count is not None else draw(st.integers(2, 5))
    out = {}
    for i in range(n):
        families = draw(st.one_of(
            st.sampled_from(FAMILIES).map(lambda f: frozenset({f})),
            st.frozensets(st.sampled_from(FAMILIES), max_size=2)))
        out[f"r{i}"] = Counting(stem=f"r{i}", counted=draw(st.sampled_from((True, True, True, False))),
                                families=families)
    return out


@st.composite
def citations(draw: st.DrawFn) -> tuple[CitationCheck, ...]:
    """What checking a claim's citations can find; mostly supported, so that most claims count."""
    out = []
    for _ in range(draw(st.integers(0, 2))):
        support = draw(st.sampled_from((Support.SUPPORTED, Support.SUPPORTED, Support.SUPPORTED, Support.CONTRADICTED,
                                        Support.UNSUPPORTED, Support.NO_EVIDENCE, Support.PHANTOM)))
        url = None if support is Support.PHANTOM else draw(st.sampled_from(URLS))
        verified = support.verified
        out.append(CitationCheck(url=url, support=support, quote="q" if verified else None,
                                 passage_sha256="0" * 64 if verified else None))
    return tuple(out)


@st.composite
def claims_of(draw: st.DrawFn, stems: list[str], picks: tuple[str, ...] = PICKS, prefix: str = "") -> list[Claim]:
    out = []
    for stem in stems:
        for i in range(draw(st.integers(1, 3))):
            recommend = draw(st.booleans())
            out.append(Claim(
                key=f"{stem}#{prefix}{i}", report=stem, statement=f"statement {stem} {prefix}{i}",
                layer=draw(st.sampled_from(("L1", "L1", "L2"))), stance="recommend" if recommend else "describe",
                decision=draw(st.sampled_from(("d1", "d2"))) if recommend else None,
                pick=draw(st.sampled_from(picks[:2] + picks)) if recommend else None, alternatives=(),
                condition=draw(st.sampled_from((None, "today", "once it is stable"))), sources=(1,),
                confidence=draw(st.sampled_from(("high", "medium", "low"))),
                quote=f"statement {stem} {prefix}{i}", position=draw(st.sampled_from((Position.FOR, Position.FOR,
                                                                                      Position.AGAINST))),
                anchored=draw(st.sampled_from((True, True, True, False))), citations=draw(citations())))
    return out


@st.composite
def judge_groups(draw: st.DrawFn, keys: list[str], groups: int = 3) -> list[Group]:
    """Any answer the judge schema accepts: each claim at most once, agree = 1 position, alternatives or
    opposite ≥ 2 (whatever the picks: a judge may call different picks opposite, or one pick alternatives)."""
    slots: dict[tuple[int, int], list[str]] = {}
    for key in keys:
        if draw(st.integers(0, 3)) == 0:
            continue  # left out, as the prompt allows
        slots.setdefault((draw(st.integers(0, groups - 1)), draw(st.sampled_from((0, 0, 1, 1, 2)))), []).append(key)
    groups: dict[int, list[list[str]]] = {}
    for (group, _position), members in sorted(slots.items()):
        groups.setdefault(group, []).append(members)
    return [("agree" if len(positions) == 1 else draw(st.sampled_from(("alternatives", "opposite"))), positions)
            for _group, positions in sorted(groups.items())]


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    counting = draw(reports())
    claims = draw(claims_of(sorted(counting)))
    keys = [c.key for c in claims]
    # a component cut at a batch boundary: some claims are judged again in the next batch, as anchors
    anchors = draw(st.lists(st.sampled_from(keys), unique=True, max_size=5)) if keys else []
    return Scenario(counting, claims, draw(judge_groups(keys)), draw(judge_groups(anchors, groups=1)))


def _batch(index: int, keys: list[str], groups: list[Group], order: int,
           anchors: bool) -> tuple[Batch, Judgement]:
    if order:
        groups = [(relation, [list(reversed(p)) for p in reversed(g)]) for relation, g in reversed(groups)]
    ids = {f"C{i + 1}": key for i, key in enumerate(reversed(keys) if order else keys)}
    id_of = {key: cid for cid, key in ids.items()}
    answer = {"groups": [{"label": "g", "relation": relation,
                          "positions": [{"claims": [id_of[k] for k in p], "summary": "s"} for p in g]}
                         for relation, g in groups]}
    judgement = Judgement.model_validate(answer, context={"ids": set(ids)})
    batch = Batch(index=index, id=f"judge-{index}", ids=ids, anchors=list(keys) if anchors else [], labels={},
                  judge_model="j/j", judge_is_author=False, messages=[], key=f"k{index}")
    return batch, judgement


def counts(claim: Claim, counting: dict[str, Counting] | None = None) -> bool:
    """The counting rule, restated for the properties: a counted report, anchored, a supported citation."""
    return (counting is None or counting[claim.report].counted) and claim.anchored and bool(supported_urls(claim))


def run(scenario: Scenario, *, order: int = 0) -> tuple[list[Any], list[Any]]:
    """assemble + classify, presenting claims, groups, positions and ids in one of several orders."""
    claims = list(reversed(scenario.claims)) if order else list(scenario.claims)
    keys = [c.key for c in claims]
    first = _batch(1, keys, scenario.groups, order, anchors=False)
    again_keys = sorted({k for _r, g in scenario.again for p in g for k in p}, reverse=bool(order))
    second = _batch(2, again_keys, scenario.again, order, anchors=True)
    batches = [second, first] if order else [first, second]
    counted = counted_claims(claims, scenario.counting, count_unsupported=False)
    alignment = assemble(claims, [b for b, _j in batches], {b.index: j for b, j in batches}, counted)
    return classify(alignment, {c.key: c for c in claims}, scenario.counting, counted)


def canonical(result: tuple[list[Any], list[Any]]) -> str:
    """The classification as text, independent of internal cluster numbering."""
    clusters, divergences = result
    members = {c.index: c.members for c in clusters}
    out = {
        "clusters": sorted([{"members": c.members, "status": c.status, "flagged": c.flagged, "pick": c.pick,
                             "layer": c.layer, "decision": c.decision, "reports": c.reports, "families": c.families,
                             "excluded": c.excluded_reports, "label": c.label, "condition": c.condition,
                             "summary": c.summary, "contradicts": sorted(members[i] for i in c.contradicts),
                             "contrary_excluded": c.contrary_excluded} for c in clusters],
                           key=lambda c: c["members"]),
        "divergences": sorted([{"sides": [(members[s.cluster], s.reports, s.families, s.label) for s in d.sides],
                                "tie": d.tie, "line": d.line, "kind": d.kind, "layer": d.layer,
                                "ambivalent": d.ambivalent_reports,
                                "weighed": sorted(members[i] for i in d.weighed_clusters),
                                "excluded": d.excluded_claims} for d in divergences],
                              key=lambda d: d["sides"]),
    }
    return json.dumps(out, sort_keys=True)


@FAST
@given(scenarios())
def test_the_output_is_a_function_of_the_input_whatever_the_order(scenario: Scenario) -> None:
    assert canonical(run(scenario)) == canonical(run(scenario, order=1))


@FAST
@given(scenarios())
def test_class_invariants(scenario: Scenario) -> None:
    clusters, divergences = run(scenario)
    counting = scenario.counting
    claims = {c.key: c for c in scenario.claims}
    assert sorted(k for c in clusters for k in c.members) == sorted(claims)  # a partition of the claims
    for cluster in clusters:
        assert all(counting[r].counted for r in cluster.reports)
        assert not set(cluster.reports) & set(cluster.excluded_reports)
        if cluster.status == "convergent":
            assert len(cluster.families) >= 2 and independent(cluster.reports, counting)
        if cluster.status == "same_family":
            assert len(cluster.reports) >= 2 and not independent(cluster.reports, counting)
        if cluster.status == "single_source":
            assert len(cluster.reports) == 1
            mine = [claims[k] for k in cluster.members if claims[k].report in cluster.reports and counts(claims[k])]
            assert cluster.flagged == any(c.stance == "recommend" or c.confidence == "high" for c in mine)
        if cluster.status in ("excluded", "unsupported"):
            assert cluster.reports == [] and not cluster.flagged
        assert cluster.shared_source == (cluster.status == "convergent" and len(cluster.sources) == 1)
        assert (cluster.status == "divergent") == (cluster.divergence is not None or any(
            cluster.index in d.clusters for d in divergences))
    for divergence in divergences:
        assert len(divergence.sides) >= 2
        held = [set(side.reports) for side in divergence.sides]
        assert all(held) and all(not (a & b) for i, a in enumerate(held) for b in held[i + 1:])
        assert all(counting[r].counted for side in held for r in side)
        assert not set(divergence.ambivalent_reports) & set().union(*held)
        support = [side.support for side in divergence.sides]
        assert support == sorted(support, reverse=True)  # families, then sources: never report counts
        assert divergence.tie == (support[0][0] == support[1][0])  # only families make a favourite
        assert divergence.line.startswith("No consensus") == divergence.tie
        if divergence.tie:
            assert "today," not in divergence.line.split(":", 1)[0] and not divergence.line.startswith("Use")
        for side in divergence.sides:
            cluster = next(c for c in clusters if c.index == side.cluster)
            assert cluster.status == "divergent" and cluster.flagged == (len(side.reports) == 1)


def without(scenario: Scenario, stems: set[str]) -> Scenario:
    """The same scenario with these reports' claims gone from the claims and from the judge's answer."""
    gone = {c.key for c in scenario.claims if c.report in stems}

    def keep(groups: list[Group]) -> list[Group]:
        out: list[Group] = []
        for relation, group in groups:
            positions = [p for p in ([k for k in p if k not in gone] for p in group) if p]
            if positions:
                out.append(("agree" if len(positions) == 1 else relation, positions))
        return out

    return Scenario({s: c for s, c in scenario.counting.items() if s not in stems},
                    [c for c in scenario.claims if c.report not in stems], keep(scenario.groups), keep(scenario.again))


def counted_view(result: tuple[list[Any], list[Any]], scenario: Scenario) -> str:
    """What counted claims show: every cluster with counted support (by its counted claims), every divergence."""
    clusters, divergences = result
    claims, counting = {c.key: c for c in scenario.claims}, scenario.counting
    counted_members = {c.index: [k for k in c.members if counts(claims[k], counting)] for c in clusters}
    view = {
        "clusters": sorted([{"members": counted_members[c.index], "status": c.status, "flagged": c.flagged,
                             "pick": c.pick, "layer": c.layer, "label": c.label, "decision": c.decision,
                             "condition": c.condition, "summary": c.summary, "reports": c.reports,
                             "families": c.families, "divergent": c.divergence is not None}
                            for c in clusters if c.reports], key=lambda c: c["members"]),
        "divergences": sorted([{"sides": [(counted_members[s.cluster], s.reports, s.label) for s in d.sides],
                                "tie": d.tie, "line": d.line, "ambivalent": d.ambivalent_reports}
                               for d in divergences], key=lambda d: d["sides"]),
    }
    return json.dumps(view, sort_keys=True)


@FAST
@given(scenarios())
def test_excluded_reports_never_change_counted_findings(scenario: Scenario) -> None:
    excluded = {s for s, c in scenario.counting.items() if not c.counted}
    with_them = run(scenario)
    without_them = run(without(scenario, excluded))
    assert counted_view(with_them, scenario) == counted_view(without_them, scenario)


@st.composite
def scenario_and_newcomer(draw: st.DrawFn) -> tuple[Scenario, Scenario]:
    base = draw(scenarios())
    stem = f"r{len(base.counting)}"
    newcomer = Counting(stem=stem, counted=draw(st.booleans()),
                        families=frozenset({draw(st.sampled_from(FAMILIES))}))
    # picks of its own, so that code's same-pick merge cannot join it to an existing cluster either
    claims = draw(claims_of([stem], picks=("P", "Q"), prefix="n"))
    groups = draw(judge_groups([c.key for c in claims]))  # the judge relates its claims only to each other
    bigger = Scenario({**base.counting, stem: newcomer}, base.claims + claims, base.groups + groups, base.again)
    return base, bigger


def _rec(stem: str, number: int, pick: str | None) -> Claim:
    return Claim(key=f"{stem}#{number}", report=stem, statement=f"statement {stem} {number}", layer="L1",
                 stance="recommend" if pick else "describe", decision="d1" if pick else None, pick=pick,
                 alternatives=(), condition=None, sources=(1,), confidence="high",
                 quote=f"statement {stem} {number}", position=Position.FOR, anchored=True,
                 citations=(CitationCheck(url=URLS[0], support=Support.SUPPORTED, quote="q",
                                          passage_sha256="0" * 64),) if pick else ())


def test_two_picks_the_judge_put_in_one_position_are_no_rivals_whatever_else_the_group_holds() -> None:
    """The counterexample hypothesis found: an `alternatives` group whose one position holds picks X and Y,
    and whose other position holds only an excluded report's claim. X and Y were never put on different
    sides by the judge, so they are never set against each other — with the excluded report or without it."""
    counting = {"r1": Counting(stem="r1", counted=True, families=frozenset({"a"})),
                "r2": Counting(stem="r2", counted=False, families=frozenset({"a"})),
                "r3": Counting(stem="r3", counted=True, families=frozenset({"a"}))}
    claims = [_rec("r1", 1, "X"), _rec("r2", 1, None), _rec("r3", 1, None), _rec("r3", 2, "Y")]
    scenario = Scenario(counting, claims, [("alternatives", [["r2#1"], ["r1#1", "r3#1", "r3#2"]])])
    clusters, divergences = run(scenario)
    assert divergences == [] and not [c for c in clusters if c.status == "divergent"]
    assert counted_view(run(scenario), scenario) == counted_view(run(without(scenario, {"r2"})), scenario)


@FAST
@given(scenario_and_newcomer())
def test_an_unrelated_report_never_changes_a_cluster(pair: tuple[Scenario, Scenario]) -> None:
    base, bigger = pair
    before = {tuple(c.members): (c.status, c.flagged, c.pick, c.reports) for c in run(base)[0]}
    after = {tuple(c.members): (c.status, c.flagged, c.pick, c.reports) for c in run(bigger)[0]}
    for members, state in before.items():
        assert after[members] == state


@FAST
@given(scenarios())
def test_counted_support_is_anchored_claims_with_a_supported_citation(scenario: Scenario) -> None:
    """Counted support ⊆ anchored ∩ supported: every report a cluster or a side counts holds, in it, an
    anchored claim with a supported citation, and every source it lists is such a citation's url."""
    clusters, divergences = run(scenario)
    claims = {c.key: c for c in scenario.claims}
    for cluster in clusters:
        held = [claims[k] for k in cluster.members if counts(claims[k], scenario.counting)]
        assert cluster.reports == sorted({c.report for c in held})
        assert set(cluster.sources) == {url for c in held for url in supported_urls(c)}
    for divergence in divergences:
        for side in divergence.sides:
            assert side.claims and all(counts(claims[k], scenario.counting) for k in side.claims)
            assert set(side.reports) == {claims[k].report for k in side.claims}


@FAST
@given(scenarios())
def test_for_x_and_against_x_are_never_both_convergent(scenario: Scenario) -> None:
    clusters, _divergences = run(scenario)
    convergent = [c for c in clusters if c.status == "convergent" and c.pick_key]
    for a in convergent:
        for b in convergent:
            if (a.layer_key, a.pick_key) == (b.layer_key, b.pick_key):
                assert a.position is b.position


JUDGES = Settings(synthesis=SynthesisSettings(judge_models=("a/judge", "b/judge", "c/judge"), batch_size=4))


def judge_requests(claims: list[Claim], counting: dict[str, Counting]) -> dict[str, tuple[Any, ...]]:
    """Every judge call the synthesis would make for these claims: id → (cache key, labels, judge, claim ids)."""
    by_key = {c.key: c for c in claims}
    edges = candidate_edges(claims, JUDGES.synthesis.similarity_threshold)
    plans = plan_batches(candidate_components(claims, edges), edges, JUDGES.synthesis.batch_size)
    batches = [build_batch(i + 1, plan, by_key, counting, JUDGES) for i, plan in enumerate(plans)]
    return {b.id: (b.key, b.labels, b.judge_model, b.ids) for b in batches}


@st.composite
def decisions_and_an_unrelated_report(draw: st.DrawFn) -> tuple[dict[str, Counting], list[Claim], list[Claim]]:
    counting = draw(reports())
    claims = draw(claims_of(sorted(counting)))
    stem = f"r{len(counting)}"
    counting[stem] = Counting(stem=stem, counted=True, families=frozenset({draw(st.sampled_from(FAMILIES))}))
    newcomer = [replace(c, layer="L9", decision="d9" if c.decision else None, statement=f"unrelated words {c.key}")
                for c in draw(claims_of([stem], picks=("P", "Q"), prefix="n"))]
    return counting, claims, newcomer


@FAST
@given(decisions_and_an_unrelated_report())
def test_an_unrelated_report_never_changes_another_decisions_judge_call(
        case: tuple[dict[str, Counting], list[Claim], list[Claim]]) -> None:
    """Stable judging: each decision is its own judge call, so a report about something else leaves
    every existing call — its claims, labels, judge and cache key — exactly as it was."""
    counting, claims, newcomer = case
    before = judge_requests(claims, counting)
    after = judge_requests(claims + newcomer, counting)
    assert before.items() <= after.items()


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
                        st.sampled_from(("key", "clusters", "divergences", "positions", "cluster", "reports",
                                         "families", "status", "pick", "summary", "layer", "label", "tie", "flagged",
                                         "x")), inner, max_size=5),
                    max_leaves=25)


@settings(max_examples=examples(200), deadline=None)
@given(JSON, JSON)
def test_the_claim_diff_accepts_any_json(old: Any, new: Any) -> None:
    diff = diff_ledgers(old, new)
    diff.text()
    diff.markdown()


# --------------------------------------------------------------------------------------------------
# One row per pick (issue 29.3)

SPELLINGS = ("{}", "the {} engine", "{} library", "org/{}", "{} v2.1", "Acme's {}")


def picks_view(result: tuple[list[Any], list[Any]]) -> str:
    """The classification as a reader acts on it, with every pick named by its key: which claims agree,
    their class, support and flag, which sides diverge and who holds them."""
    clusters, divergences = result
    members = {c.index: c.members for c in clusters}
    return json.dumps({
        "clusters": sorted([{"members": c.members, "status": c.status, "flagged": c.flagged, "pick": c.pick_key,
                             "position": c.position.value, "reports": c.reports, "families": c.families,
                             "contradicts": sorted(members[i] for i in c.contradicts)} for c in clusters],
                           key=lambda c: c["members"]),
        # sides in order of support; a tie lists its sides by label, which is what a pick is called
        "divergences": sorted([{"sides": _sides_in_order(d), "tie": d.tie, "kind": d.kind} for d in divergences],
                              key=lambda d: d["sides"])},
        sort_keys=True)


def _sides_in_order(divergence: Any) -> list[Any]:
    sides = [(s.claims, s.reports, s.pick_key) for s in divergence.sides]
    return sorted(sides) if divergence.tie else sides


def aliased(scenario: Scenario, spelling: list[int]) -> Scenario:
    """The scenario with each recommendation's pick written in another of its spellings."""
    claims = [replace(c, pick=SPELLINGS[spelling[i % len(spelling)]].format(c.pick)) if c.pick else c
              for i, c in enumerate(scenario.claims)]
    return replace(scenario, claims=with_aliases(claims))


@FAST
@given(scenarios(), st.lists(st.integers(0, len(SPELLINGS) - 1), min_size=1, max_size=6))
def test_alignment_and_classes_do_not_depend_on_what_a_pick_is_called(scenario: Scenario,
                                                                       spelling: list[int]) -> None:
    """Any report may name a pick another way ("X", "the X engine", "org/X", "X v2.1", "Acme's X"): the
    clusters, classes, support and divergences are the same, pick for pick."""
    plain = replace(scenario, claims=with_aliases(scenario.claims))
    assert picks_view(run(plain)) == picks_view(run(aliased(scenario, spelling)))


@FAST
@given(scenarios(), st.sampled_from(("L1", "L2", "general")))
def test_a_pick_is_one_finding_whatever_layer_it_is_filed_under(scenario: Scenario, layer: str) -> None:
    """Moving a claim to another layer never splits a pick's counted support over two findings: two
    counted findings of one pick and position exist only where their statements give different numbers."""
    claims = list(scenario.claims)
    if claims:
        claims[0] = replace(claims[0], layer=layer)
    clusters, _divergences = run(replace(scenario, claims=claims))
    by_key = {c.key: c for c in claims}
    held = [c for c in clusters if c.pick_key and c.reports]
    for i, a in enumerate(held):
        for b in held[i + 1:]:
            if (a.pick_key, a.position) == (b.pick_key, b.position):
                assert any(numbers_disagree(by_key[x].statement, by_key[y].statement)
                           for x in a.members for y in b.members)


def rival_picks(result: tuple[list[Any], list[Any]]) -> list[tuple[str, str]]:
    clusters, _divergences = result
    by_index = {c.index: c for c in clusters}
    return [(c.pick_key, by_index[i].pick_key) for c in clusters for i in c.contradicts
            if c.pick_key and by_index[i].pick_key and c.pick_key != by_index[i].pick_key]


@FAST
@given(scenarios())
def test_two_picks_diverge_only_where_the_judge_said_they_answer_one_decision(scenario: Scenario) -> None:
    """A judge that calls no group `alternatives` never sets two different picks against each other,
    whatever it calls `opposite` and whatever code splits; calling the same groups alternatives may."""
    def relabel(groups: list[Group], relation: str) -> list[Group]:
        return [(r if r == "agree" else relation, g) for r, g in groups]

    opposite = replace(scenario, groups=relabel(scenario.groups, "opposite"), again=relabel(scenario.again, "opposite"))
    assert rival_picks(run(opposite)) == []
