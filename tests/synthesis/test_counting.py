"""The counting rules at the model seam (issue 23, points 4 and 5): scripted claims and judge answers
through the real `align.assemble` and `classify`, nothing mocked.

Each test is one rule of docs/METHODOLOGY.md ("Counting"): what counts (anchored, a supported citation),
negation (for-X beside against-X), one shared source, a same-family tie, acronyms and expansions, numbers
that disagree, and a condition shown only beside the report that stated it. The same rules are shown
through the CLI in test_counting_cli.py.
"""

from __future__ import annotations

from dataclasses import replace

from research_dispatch.synthesis.align.judge import Batch, Judgement, assemble
from research_dispatch.synthesis.align.picks import with_aliases
from research_dispatch.synthesis.common.checked import CitationCheck, Position, Support
from research_dispatch.synthesis.count.classify import Cluster, Divergence, classify
from research_dispatch.synthesis.count.counting import Standing, Tally, counted_claims, standing
from research_dispatch.synthesis.extract.claims import Claim
from research_dispatch.synthesis.read.inputs import Counting

PAGE = "https://pages.example/one"
OTHER = "https://pages.example/two"
THIRD = "https://pages.example/three"


def supported(url: str = PAGE) -> CitationCheck:
    return CitationCheck(url=url, support=Support.SUPPORTED, quote="the passage says so", passage_sha256="a" * 64)


def contradicted(url: str = PAGE) -> CitationCheck:
    return CitationCheck(url=url, support=Support.CONTRADICTED, quote="the passage says no", passage_sha256="b" * 64)


def claim(key: str, statement: str, *, pick: str | None = "GRPO", position: Position = Position.FOR,
          citations: tuple[CitationCheck, ...] | None = None, anchored: bool = True, condition: str | None = None,
          layer: str = "RL algorithm") -> Claim:
    return Claim(key=key, report=key.split("#")[0], statement=statement, layer=layer,
                 stance="recommend" if pick else "describe",
                 decision="RL algorithm for post-training" if pick else None,
                 pick=pick, alternatives=(), condition=condition, sources=(1,), confidence="medium", quote=statement,
                 section="Findings", position=position, anchored=anchored,
                 citations=(supported(),) if citations is None else citations)


def reports(**families: str) -> dict[str, Counting]:
    return {stem: Counting(stem=stem, counted=True, families=frozenset({family})) for stem, family in families.items()}


def judged(claims: list[Claim], *positions: list[str]) -> tuple[Batch, Judgement]:
    """One judge call over `claims` whose answer is one group: `agree` for one position, else `alternatives`
    (different picks for one decision) or `opposite` (the same pick, or findings) as the positions hold."""
    ids = {f"C{i + 1}": c.key for i, c in enumerate(claims)}
    id_of = {key: claim_id for claim_id, key in ids.items()}
    by_key = {c.key: c for c in claims}
    picks = {by_key[k].pick for p in positions for k in p}
    relation = "agree" if len(positions) == 1 else "alternatives" if len(picks) > 1 else "opposite"
    answer = {"groups": [{"label": "g", "relation": relation,
                          "positions": [{"claims": [id_of[k] for k in p], "summary": "s"} for p in positions]}]}
    batch = Batch(index=1, id="judge-1", ids=ids, anchors=[], labels={}, judge_model="j/j", judge_is_author=False,
                  messages=[], key="k1")
    return batch, Judgement.model_validate(answer, context={"ids": set(ids)})


def synthesis(claims: list[Claim], counting: dict[str, Counting], *positions: list[str],
              count_unsupported: bool = False) -> tuple[list[Cluster], list[Divergence]]:
    counted = counted_claims(claims, counting, count_unsupported=count_unsupported)
    batch, judgement = judged(claims, *positions)
    alignment = assemble(claims, [batch], {1: judgement}, counted)
    return classify(alignment, {c.key: c for c in claims}, counting, counted)


def test_we_do_not_recommend_x_counts_against_x_never_for_it() -> None:
    """A careless judge puts "use GRPO" and "we do not recommend GRPO" in one agreeing group: code splits
    them, and for-X beside against-X is a divergence (kind contradiction), never a convergence."""
    claims = [claim("a#1", "GRPO should be the default"),
              claim("b#1", "We do not recommend GRPO", position=Position.AGAINST),
              claim("c#1", "GRPO is the algorithm to adopt")]
    clusters, [divergence] = synthesis(claims, reports(a="deepseek", b="anthropic", c="openai"),
                                       ["a#1", "b#1", "c#1"])
    assert {c.status for c in clusters} == {"divergent"}
    assert divergence.kind == "contradiction" and divergence.tie is False
    assert [(s.label, s.reports) for s in divergence.sides] == [("GRPO", ["a", "c"]), ("against GRPO", ["b"])]
    assert divergence.line.startswith("Use GRPO today, avoid GRPO when")


def test_for_and_against_one_pick_are_never_both_convergent() -> None:
    """With a careful extractor, "should be the default" and "should not be" are both agreed by two
    families; the judge never compared them (two agreeing groups), and code still sets them against each
    other: equal families, no consensus."""
    claims = [claim("a#1", "GRPO should be the default"), claim("b#1", "GRPO should be the default"),
              claim("c#1", "GRPO should not be the default", position=Position.AGAINST),
              claim("d#1", "GRPO should not be the default", position=Position.AGAINST)]
    counting = reports(a="deepseek", b="anthropic", c="openai", d="google")
    counted = counted_claims(claims, counting, count_unsupported=False)
    ids = {f"C{i + 1}": c.key for i, c in enumerate(claims)}
    answer = {"groups": [{"label": "g", "relation": "agree", "positions": [{"claims": ["C1", "C2"], "summary": "s"}]},
                         {"label": "h", "relation": "agree", "positions": [{"claims": ["C3", "C4"], "summary": "s"}]}]}
    batch = Batch(index=1, id="judge-1", ids=ids, anchors=[], labels={}, judge_model="j/j", judge_is_author=False,
                  messages=[], key="k1")
    alignment = assemble(claims, [batch], {1: Judgement.model_validate(answer, context={"ids": set(ids)})}, counted)
    clusters, [divergence] = classify(alignment, {c.key: c for c in claims}, counting, counted)
    assert [c.status for c in clusters] == ["divergent", "divergent"]
    assert divergence.tie and divergence.line.startswith("No consensus (2 families each): GRPO; or against GRPO")


def test_only_anchored_claims_with_a_supported_citation_count() -> None:
    claims = [claim("a#1", "GRPO should be the default"),
              claim("b#1", "GRPO should be the default",
                    citations=(CitationCheck(url=PAGE, support=Support.UNSUPPORTED),)),
              claim("c#1", "GRPO should be the default", anchored=False),
              claim("d#1", "GRPO should be the default", citations=(contradicted(),)),
              claim("e#1", "GRPO should be the default", citations=())]
    counting = reports(a="deepseek", b="anthropic", c="openai", d="google", e="qwen")
    assert [standing(c, counting[c.report], count_unsupported=False) for c in claims] == [
        Standing.COUNTED, Standing.UNSUPPORTED, Standing.NOT_ANCHORED, Standing.CONTRADICTED, Standing.UNSUPPORTED]
    [cluster], [] = synthesis(claims, counting, [c.key for c in claims])
    assert cluster.status == "single_source" and cluster.reports == ["a"] and cluster.sources == [PAGE]
    assert sorted(cluster.members) == sorted(c.key for c in claims)  # shown, never silently dropped
    # count_unsupported relaxes the citation, never the anchor, and never a claim its own source contradicts
    [cluster], [] = synthesis(claims, counting, [c.key for c in claims], count_unsupported=True)
    assert cluster.status == "convergent" and cluster.reports == ["a", "b", "e"]
    tally = Tally.of(claims, counted_claims(claims, counting, count_unsupported=False))
    assert (tally.claims, tally.anchored, tally.supported, tally.unsupported, tally.contradicted, tally.counted) == (
        5, 4, 1, 2, 1, 1)
    assert tally.anchored == tally.supported + tally.unsupported + tally.contradicted


def test_a_claim_nobody_can_back_is_not_counted_rather_than_dropped() -> None:
    claims = [claim("a#1", "GRPO should be the default", citations=()),
              claim("b#1", "GRPO should be the default", anchored=False)]
    [cluster], [] = synthesis(claims, reports(a="deepseek", b="anthropic"), ["a#1", "b#1"])
    assert cluster.status == "unsupported" and cluster.reports == [] and not cluster.flagged


def test_agreement_on_one_shared_page_is_marked_shared_source() -> None:
    claims = [claim("a#1", "GRPO should be the default"), claim("b#1", "GRPO should be the default")]
    [cluster], [] = synthesis(claims, reports(a="deepseek", b="anthropic"), ["a#1", "b#1"])
    assert cluster.status == "convergent" and cluster.shared_source and cluster.sources == [PAGE]
    claims[1] = replace(claims[1], citations=(supported(OTHER), supported(PAGE)))
    [cluster], [] = synthesis(claims, reports(a="deepseek", b="anthropic"), ["a#1", "b#1"])
    assert cluster.status == "convergent" and not cluster.shared_source and cluster.sources == [PAGE, OTHER]


def test_a_second_report_of_one_family_never_breaks_a_family_tie() -> None:
    """Sides are ranked by families, then sources; the tie is a tie of families. The side with two
    anthropic reports and two sources is listed first, but it is no favourite."""
    claims = [claim("a#1", "Monarch is the orchestrator to adopt", pick="Monarch"),
              claim("b#1", "Ray is the orchestrator to adopt", pick="Ray", citations=(supported(OTHER),)),
              claim("c#1", "Ray is the orchestrator to adopt", pick="Ray", citations=(supported(THIRD),))]
    _clusters, [divergence] = synthesis(claims, reports(a="deepseek", b="anthropic", c="anthropic"),
                                       ["a#1"], ["b#1", "c#1"])
    assert [s.label for s in divergence.sides] == ["Ray", "Monarch"]  # 1 family, 2 sources before 1 family, 1
    assert [s.support for s in divergence.sides] == [(1, 2), (1, 1)]
    assert divergence.tie and divergence.line.startswith("No consensus (1 family each): Ray; or Monarch")
    assert divergence.kind == "alternatives"


def test_an_acronym_and_its_expansion_are_one_pick() -> None:
    claims = with_aliases([claim("a#1", "GRPO should be the default", pick="GRPO"),
                           claim("b#1", "Group Relative Policy Optimization is the one to adopt",
                                 pick="Group Relative Policy Optimization"),
                           claim("c#1", "PPO is the one to adopt", pick="PPO")])
    assert [c.pick_key for c in claims] == ["grpo", "grpo", "ppo"]
    assert claims[1].pick == "Group Relative Policy Optimization"  # the report's name is kept; the key merges
    _clusters, [divergence] = synthesis(claims, reports(a="deepseek", b="anthropic", c="openai"),
                                        ["a#1"], ["b#1"], ["c#1"])
    assert [s.label for s in divergence.sides] == ["GRPO", "PPO"] and divergence.sides[0].reports == ["a", "b"]
    assert not divergence.tie and divergence.line.startswith("Use GRPO today, switch to PPO")


def test_numbers_that_disagree_are_never_one_agreement() -> None:
    claims = [claim("a#1", "DAPO reaches 50 points on AIME 2024", pick=None),
              claim("b#1", "DAPO gets only 30 points on AIME 2024", pick=None),
              claim("c#1", "DAPO reaches 50 points on AIME 2024 with clip-higher", pick=None)]
    clusters, [divergence] = synthesis(claims, reports(a="deepseek", b="anthropic", c="openai"),
                                       ["a#1", "b#1", "c#1"])
    assert sorted(sorted(c.members) for c in clusters) == [["a#1", "c#1"], ["b#1"]]
    assert divergence.kind == "contradiction" and [s.reports for s in divergence.sides] == [["a", "c"], ["b"]]


def test_a_condition_is_shown_beside_the_report_that_stated_it_only() -> None:
    """A report that holds both sides counts for neither, and its condition goes with it; a side's
    condition names the reports whose own claims state it."""
    claims = [claim("a#1", "Monarch is the orchestrator to adopt", pick="Monarch"),
              claim("b#1", "Ray is the orchestrator to adopt", pick="Ray", condition="once rewards are dense"),
              claim("b#2", "Monarch is the orchestrator to adopt", pick="Monarch", condition="once its API is stable"),
              claim("c#1", "Ray is the orchestrator to adopt", pick="Ray"),
              claim("d#1", "Ray is the orchestrator to adopt", pick="Ray", condition="once rewards are dense")]
    counting = reports(a="deepseek", b="anthropic", c="openai", d="google")
    _clusters, [divergence] = synthesis(claims, counting, ["a#1", "b#2"], ["b#1", "c#1", "d#1"])
    ray, monarch = divergence.sides
    assert divergence.ambivalent_reports == ["b"]
    assert (monarch.reports, monarch.condition, monarch.condition_reports) == (["a"], None, [])
    assert (ray.reports, ray.condition, ray.condition_reports) == (["c", "d"], "once rewards are dense", ["d"])
