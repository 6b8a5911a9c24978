"""`diff_ledgers` on hand-written ledgers: the API the publish stage calls."""

from __future__ import annotations

from typing import Any

from research_dispatch.synthesis import LedgerDiff, diff_ledgers


def cluster(key: str, status: str, reports: list[str], families: list[str] | None = None, **extra: Any) -> dict:
    return {"key": key, "layer": key.split("/")[0], "status": status, "reports": reports,
            "families": families if families is not None else reports, "summary": f"summary of {key}",
            "pick": extra.pop("pick", None), "flagged": extra.pop("flagged", False), **extra}


def ledger(*clusters: dict, divergences: list[dict] | None = None) -> dict:
    return {"schema": "research-dispatch/claims@1", "clusters": list(clusters), "divergences": divergences or []}


def test_first_run_everything_is_new() -> None:
    new = ledger(cluster("a/x", "convergent", ["r1", "r2"]), cluster("b/y", "single_source", ["r1"]))
    diff = diff_ledgers(None, new)
    assert [i.key for i in diff.new] == ["a/x", "b/y"]
    assert diff.counts() == {"decisions": 0, "lost_citations": 0, "promoted": 0, "lost_support": 0,
                             "new_divergences": 0, "new": 2, "dropped": 0}  # a first run: no decision "changed"
    assert diff.new[0].before is None and diff.new[0].after == "convergent (2 families, 0 sources)"


def test_each_category() -> None:
    old = ledger(
        cluster("a/promoted", "single_source", ["r1"], flagged=True),
        cluster("b/weaker", "convergent", ["r1", "r2", "r3"], ["f1", "f2", "f3"]),
        cluster("c/same-family-now", "convergent", ["r1", "r2"], ["f1", "f2"]),
        cluster("d/gone", "single_source", ["r4"]),
        cluster("e/stable", "convergent", ["r1", "r2"]),
        cluster("f/diverged", "convergent", ["r1", "r2"]),
    )
    new = ledger(
        cluster("a/promoted", "convergent", ["r1", "r5"]),
        cluster("b/weaker", "convergent", ["r1", "r2"], ["f1", "f2"]),
        cluster("c/same-family-now", "same_family", ["r1", "r2"], ["f1"]),
        cluster("e/stable", "convergent", ["r1", "r2"]),
        cluster("f/diverged", "divergent", ["r1", "r2"]),
        cluster("g/fresh", "single_source", ["r9"], flagged=True, pick="Thing"),
        divergences=[{"key": "layer/f", "layer": "f", "positions": [
            {"label": "X", "reports": ["r1", "r2"]}, {"label": "Y", "reports": ["r6"]}]}],
    )
    diff = diff_ledgers(old, new)
    assert [i.key for i in diff.promoted] == ["a/promoted"]
    assert [i.key for i in diff.lost_support] == ["b/weaker", "c/same-family-now"]
    assert [i.key for i in diff.new] == ["g/fresh"] and diff.new[0].summary == "Thing"
    assert [i.key for i in diff.dropped] == ["d/gone"] and diff.dropped[0].after is None
    [divergence] = diff.new_divergences
    assert divergence.key == "layer/f" and divergence.summary == "X vs Y"
    assert divergence.after == "divergent (0 vs 0 families)"  # support is families, never reports
    # a ledger that does not record who was asked keeps the old flag
    assert diff.promoted[0].before == "single-source — may be model bias (1 family, 0 sources)"
    assert not diff.is_empty
    # an unchanged divergence is not new again
    again = diff_ledgers(new, new)
    assert again.is_empty and again.counts() == dict.fromkeys(again.counts(), 0)


def test_text_and_markdown() -> None:
    old = ledger(*(cluster(f"a/c{i:03d}", "single_source", ["r1"]) for i in range(80)))
    new = ledger(*(cluster(f"a/c{i:03d}", "convergent", ["r1", "r2"]) for i in range(80)),
                 cluster("z/hostile", "single_source", ["r1"],
                         summary="<!-- x --> @octocat says <img src=x> | [link](http://e.test) `code`"))
    diff = diff_ledgers(old, new)
    text = diff.text()
    assert text.splitlines()[0] == ("claim diff: 0 decisions changed, 0 lost a supported citation, 80 promoted to "
                                    "convergent, 0 lost support, 0 new divergences, 1 new, 0 dropped")
    markdown = diff.markdown(max_items=10)
    assert "… and 70 more" in markdown and "a/c009" in markdown and "a/c010" not in markdown
    assert "… and 1 more" in markdown  # the budget is spent: the new item is counted, not shown
    hostile = diff_ledgers(None, ledger(new["clusters"][-1])).markdown()
    assert "<!--" not in hostile and "<img" not in hostile and "&lt;img" in hostile
    assert "\uff20octocat" in hostile and "@octocat" not in hostile  # GitHub will not ping
    assert "\\[link\uff3d(http\uff1a//e.test)" in hostile and "\\|" in hostile  # no link, no autolink
    assert LedgerDiff().markdown() == "No change in the claims ledger."
    assert LedgerDiff().text() == "claim diff: no change"


def test_tolerates_old_ledgers_with_missing_fields() -> None:
    old = {"clusters": [{"key": "a/x"}, {"nokey": True}, "junk"], "divergences": None}
    diff = diff_ledgers(old, ledger(cluster("a/x", "convergent", ["r1", "r2"])))
    assert [i.key for i in diff.promoted] == ["a/x"]


def divergence(line: str, tie: bool, *sides: tuple[str, list[str], list[str]]) -> dict:
    return {"key": "divergence/o/monarch", "layer": "orchestration", "decision": "orchestrator", "line": line,
            "tie": tie, "kind": "alternatives",
            "positions": [{"cluster": f"o/{label.lower()}", "label": label, "families": families, "sources": sources,
                           "reports": families} for label, families, sources in sides]}


def test_a_flipped_favourite_is_listed_by_decision_never_no_change() -> None:
    """2:1 → 1:2: every cluster keeps its status (divergent) and its key, so only the diff by decision
    can tell; it names the changed favourite and shows the line and each side's support before and after."""
    clusters = [cluster("o/monarch", "divergent", ["r3"], pick="Monarch"), cluster("o/ray", "divergent", ["r1"],
                                                                                    pick="Ray")]
    old = ledger(*clusters, divergences=[divergence("Use Ray today, switch to Monarch when it is stable.", False,
                                                    ("Ray", ["a", "b"], ["u1", "u2"]), ("Monarch", ["c"], ["u3"]))])
    new = ledger(*clusters, divergences=[divergence("Use Monarch today, switch to Ray when it scales.", False,
                                                    ("Monarch", ["b", "c"], ["u3", "u4"]), ("Ray", ["a"], ["u1"]))])
    diff = diff_ledgers(old, new)
    assert not diff.is_empty and diff.headline().startswith("claim diff: 1 decisions changed")
    [change] = diff.decisions
    assert change.changes[0] == "favourite changed: Ray → Monarch"
    assert change.before.startswith("Use Ray today") and change.after.startswith("Use Monarch today")
    assert change.sides_before == ("Ray: 2 families (a, b), 2 sources", "Monarch: 1 family (c), 1 source")
    assert change.sides_after == ("Monarch: 2 families (b, c), 2 sources", "Ray: 1 family (a), 1 source")
    text, markdown = diff.text(), diff.markdown()
    assert "favourite changed: Ray → Monarch" in text and "sides after: Monarch: 2 families (b, c), 2 sources" in text
    assert "**Decisions changed**" in markdown and "favourite changed: Ray → Monarch" in markdown
    # a tie that becomes a favourite, a new side and a lost side are named too
    tied = ledger(*clusters, divergences=[divergence("No consensus (1 family each): Ray; or Monarch.", True,
                                                     ("Ray", ["a"], ["u1"]), ("Monarch", ["c"], ["u3"]))])
    widened = ledger(*clusters, cluster("o/torchforge", "divergent", ["r4"], pick="TorchForge"), divergences=[
        divergence("Use Ray today, switch to TorchForge when it ships.", False, ("Ray", ["a", "b"], ["u1"]),
                   ("TorchForge", ["d"], ["u5"]))])
    [change] = diff_ledgers(tied, widened).decisions
    assert change.changes == ("favourite changed: no consensus → Ray", "new side: TorchForge", "lost side: Monarch",
                              "Ray: 1 family (a), 1 source → 2 families (a, b), 1 source")
    assert diff_ledgers(new, new).is_empty


def test_a_claim_that_lost_its_supported_citation_is_always_listed() -> None:
    citation = {"url": "https://pages.example/x", "support": "supported", "quote": "q", "passage_sha256": "0" * 64}
    claim = {"key": "r1#abc", "layer": "optimizer", "statement": "Muon beats AdamW", "citations": [citation]}
    old = {**ledger(), "claims": [claim]}
    new = {**ledger(), "claims": [{**claim, "citations": [{"url": citation["url"], "support": "unsupported",
                                                           "quote": None, "passage_sha256": None}]}]}
    diff = diff_ledgers(old, new)
    [item] = diff.lost_citations
    assert item.key == "r1#abc" and item.after == "unsupported"
    assert item.before == "supported by https://pages.example/x"
    assert "lost a supported citation:" in diff.text() and not diff.is_empty
