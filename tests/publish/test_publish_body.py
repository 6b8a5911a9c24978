"""The PR body: model text cannot forge the marker, ping people, hide text or break the 65,536 cap."""

from __future__ import annotations

import json
import re

import pytest

from research_dispatch.leg.report import load_report, render_report
from research_dispatch.publish import prbody
from tests.publish.conftest import CYCLE, World
from tests.test_neutralise import acts

HOSTILE = ("<!-- research-refresh:v1 cycle=evil --> research-refresh:v1 ping @octocat and @acme/team "
           "\u202egnp.exe\u202c zero\u200bwidth <script>alert(1)</script> | pipe ::set-output x "
           "fixes #1, closes owner/repo#2, see owner/repo#1234 and GH-7 at www.evil.example or "
           "[click](https://evil.example/x) ![pixel](https://evil.example/p.png) $\\color{red}{approved}$")


def _plant(world: World) -> None:
    """A degraded report and a failed leg whose texts carry everything a hostile model might write."""
    world.run_legs("diloco-family")
    path = world.repo / "research" / "02-diloco-family.md"
    report = load_report(path, repo=world.repo)
    meta = report.meta.model_copy(update={"status": "degraded", "status_reasons": [HOSTILE],
                                           "served_providers": ["DeepSeek <!-- x --> @octocat"]})
    path.write_text(render_report(meta, report.body, []), encoding="utf-8")
    status = world.repo / "build" / "legs" / "04-verl-trl.json"
    status.parent.mkdir(parents=True, exist_ok=True)
    status.write_text(json.dumps({"stem": "04-verl-trl", "topic": "verl-trl", "model": "anthropic/claude-sonnet-4.6",
                                  "family": "anthropic", "status": "failed", "reasons": [HOSTILE],
                                  "error": "boom " + HOSTILE, "cycle": CYCLE}), encoding="utf-8")


def _assert_clean(body: str) -> None:
    assert body.startswith(f"<!-- research-refresh:v1 cycle={CYCLE} -->\n")
    assert body.count("<!--") == 1 and body.count("-->") == 1
    assert body.count("research-refresh:v1") == 1
    assert re.search(r"(?<!`)@(octocat|acme/team)", body) is None
    assert "\uff20octocat" in body and "\uff20acme/team" in body  # sanitize.NEUTRAL_AT
    for char in ("\u202e", "\u202c", "\u200b"):
        assert char not in body
    assert "<script" not in body and "&lt;script" in body
    assert "\n::set-output" not in body
    # GitHub acts on no issue reference, link, image, autolink or math in it (tests/test_neutralise.py's checker),
    # once our own run link and dollar amounts are set aside
    ours = re.sub(r"\[run log\]\([^)]*\)|\$[0-9]+(?:\.[0-9]+)?", "", body)
    assert "evil.example" in body and acts(ours) == []


def test_model_text_is_sanitised_in_the_pr_body(small_world: World) -> None:
    _plant(small_world)
    result = small_world.publish()
    assert result.operation == "created" and result.draft is True
    body = small_world.github.pulls[0]["body"]
    _assert_clean(body)
    assert "`02-diloco-family` (deepseek/deepseek-v4-pro) — **degraded**" in body
    assert "`04-verl-trl` (anthropic/claude-sonnet-4.6) — **failed**: boom" in body
    table_row = next(line for line in body.splitlines() if line.startswith("| diloco-family"))
    assert table_row.count(" | ") == 7  # a `|` in model text cannot add a column
    # the commit carries none of it: subjects and trailers come from validated data only
    log = small_world.origin_git("log", "--format=%B", "main..research-refresh/2026-H2")
    assert "Served-Provider: DeepSeek octocat" in log and "@" not in log
    assert "<!--" not in log and "\u202e" not in log and "script" not in log


@pytest.mark.slow
def test_the_body_is_capped_at_65536_characters(world_factory) -> None:
    world = world_factory(["02-diloco"])
    for number in range(10, 26):  # 16 topics x 16 models = 256 legs that never ran
        models = "".join(f"  - model: acme/a-long-model-name-that-widens-every-row-{m:02d}\n" for m in range(16))
        (world.repo / "topics" / f"{number}-bulk-topic-with-a-long-id-{number}.yaml").write_text(
            f"id: bulk-topic-with-a-long-id-{number}\ntitle: Bulk {number}\nscope: Only adds rows.\n"
            f"models:\n{models}",
            encoding="utf-8")
    world.run_legs("diloco-family")
    result = world.publish()
    assert result.operation == "created"
    body = world.github.pulls[0]["body"]
    assert len(body) <= prbody.BODY_LIMIT and len(body) > 60_000
    assert body.endswith(prbody.TRUNCATED_NOTE) and body.startswith("<!-- research-refresh:v1 ")
    assert result.title == f"docs(research): refresh {CYCLE} (partial: 1/257 legs) — 1 report, 256 missing"


def test_inline_block_and_cap_helpers() -> None:
    assert prbody.inline("a\nb <!-- c --> @dave") == "a b \uff20dave"
    assert prbody.cell("x|y") == "x\\|y"
    block = prbody.block("<details><summary>Claims</summary>\n\n- <b>kept</b> <img src=x> @eve\n</details>")
    assert block.startswith("<details><summary>Claims</summary>") and "&lt;img" in block and "\uff20eve" in block
    assert prbody.defang("Research-Refresh : v2") == "Research-Refresh v2"
    assert prbody.cap("x" * 10, limit=100) == "x" * 10
    capped = prbody.cap("y" * 500, limit=100)
    assert len(capped) == 100 and capped.endswith(prbody.TRUNCATED_NOTE)
    assert prbody.render_title("2027-H1", reports=1, synthesis=False, failed=0, unverified=2) == \
        "docs(research): refresh 2027-H1 — 1 report, 2 unverified"
