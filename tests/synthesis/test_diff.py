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
    assert diff.counts() == {"promoted": 0, "lost_support": 0, "new_divergences": 0, "new": 2, "dropped": 0}
    assert diff.new[0].before is None and diff.new[0].after == "convergent (2 reports, 2 families)"


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
    assert divergence.after == "divergent (2 vs 1 reports)"
    assert diff.promoted[0].before == "single-source, flagged (1 report, 1 family)"
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
    assert text.splitlines()[0] == ("claim diff: 80 promoted to convergent, 0 lost support, 0 new divergences, "
                                    "1 new, 0 dropped")
    markdown = diff.markdown(max_items=10)
    assert "… and 70 more" in markdown and "a/c009" in markdown and "a/c010" not in markdown
    assert "… and 1 more" in markdown  # the budget is spent: the new item is counted, not shown
    hostile = diff_ledgers(None, ledger(new["clusters"][-1])).markdown()
    assert "<!--" not in hostile and "<img" not in hostile and "&lt;img" in hostile
    assert "`@octocat`" in hostile  # GitHub will not ping
    assert "\\[link\\]" in hostile and "\\|" in hostile
    assert LedgerDiff().markdown() == "No change in the claims ledger."
    assert LedgerDiff().text() == "claim diff: no change"


def test_tolerates_old_ledgers_with_missing_fields() -> None:
    old = {"clusters": [{"key": "a/x"}, {"nokey": True}, "junk"], "divergences": None}
    diff = diff_ledgers(old, ledger(cluster("a/x", "convergent", ["r1", "r2"])))
    assert [i.key for i in diff.promoted] == ["a/x"]
