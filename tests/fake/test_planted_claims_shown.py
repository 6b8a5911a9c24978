"""A planted claim rests on what the fake researcher was really shown (issue 23 point 8, docs/FAKES.md).

The demo, run as a user runs it (the CLI in process: tests/clirun.py), and for each of the five topics
every planted claim a report makes has its key content (`script_researcher.claim_key`, at least
`KEY_SHARE` of it) in one passage the product stored for the cited source in `research/<stem>.evidence.jsonl` — what the
conversation showed the model, never the page it did not see. The deliberate miscite is then the only
reason a demo citation is unsupported, and the fake judge quotes one sentence or one list item.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from research_dispatch_fakes import script_researcher as sr
from research_dispatch_fakes.corpus import TOPIC_IDS
from tests.bounds.conftest import child_env
from tests.clirun import run_cli

pytestmark = pytest.mark.slow


def _cited(report: str, statement: str) -> list[int]:
    """The `[n]` numbers written right after the statement in the published report."""
    match = re.search(re.escape(statement) + r"\s*\[(\d+(?:\s*,\s*\d+)*)\]", report)
    return [int(n) for n in re.split(r"\s*,\s*", match.group(1))] if match else []


def test_every_planted_claim_of_the_demo_is_in_a_passage_shown_for_its_source(tmp_path: Path) -> None:
    done = run_cli("demo", "--dir", "demo", env=child_env(), cwd=tmp_path)
    assert done.code == 0, done.output
    demo = tmp_path / "demo"
    ledger = json.loads((demo / "framework" / "claims.json").read_text(encoding="utf-8"))
    urls = {r["stem"]: {s["id"]: s["url"] for s in r["sources"]} for r in ledger["reports"]}
    made = 0
    for index, topic in enumerate(TOPIC_IDS, start=1):
        stem = f"{index:02d}-{topic}"
        report = (demo / "research" / f"{stem}.md").read_text(encoding="utf-8")
        evidence = [json.loads(line) for line in
                    (demo / "research" / f"{stem}.evidence.jsonl").read_text(encoding="utf-8").splitlines()]
        for claim in sr.claims_for_topic(topic):
            cited = _cited(report, claim["statement"])
            if claim["statement"] not in report:
                continue
            made += 1
            assert len(cited) == 1, (stem, claim["id"])
            url = urls[stem][cited[0]]
            assert sr._norm_url(url) in {sr._norm_url(u) for u in claim["sources"]}, (stem, claim["id"])
            shown = [e["text"] for e in evidence if sr._norm_url(e["url"]) == sr._norm_url(url)]
            key = sr.claim_key(claim["statement"])
            best = max(len(key & sr._content_words(text)) for text in shown)
            assert best >= sr.KEY_SHARE * len(key), (stem, claim["id"], url)
    assert made >= 10  # GRPO three times, OpenEnv twice, PRIME-RL, Monarch, Ray, ...
    # every unsupported citation is a miscited page sentence, never a planted claim
    planted = {c["statement"] for t in TOPIC_IDS for c in sr.claims_for_topic(t)}
    unsupported = [c for c in ledger["claims"] if c["standing"] == "unsupported"]
    assert unsupported and not [c for c in unsupported if c["statement"] in planted]
    # the judge quotes one sentence or one list item: never several lines
    quotes = [x["quote"] for c in ledger["claims"] for x in c["citations"] if x.get("quote")]
    assert quotes and all("\n" not in q and not q.lstrip().startswith("- ") for q in quotes)
