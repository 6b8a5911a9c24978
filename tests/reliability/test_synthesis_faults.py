"""Synthesis faults: a damaged previous ledger or cache entry, and the synthesis' overall time limit.

Run as a user runs them: `research-dispatch synthesize` against the fake gateway.
A damaged input the product can do without (the previous ledger, a cache entry: generated files that only
save money and feed the diff) is a warning naming the file and the field, and the synthesis goes on as if
it were absent — never "internal error". A time limit reached before anything was extracted is exit 1
and writes nothing; what the stage does when the limit cuts extraction or judging short is tested at the
model seam (test_synthesis_rules.py).
"""
# ruff: noqa: F811 - the imported fixtures are the tests' arguments

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

# the synthesis suite's fixtures (`planted`: the six planted reports; `synth_env`), used as test arguments
from tests.clirun import CliRun
from tests.synthesis.conftest import planted, synth_env, synthesize_cli, write_pyproject  # noqa: F401

reliability = pytest.mark.reliability


def clean_run(result: CliRun) -> None:
    assert result.code == 0, result.stderr
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr + result.stdout


def valid_ledger(repo: Path) -> dict:  # type: ignore[type-arg]
    from research_dispatch.synthesis.write.ledger import Ledger

    data = json.loads((repo / "framework" / "claims.json").read_text(encoding="utf-8"))
    Ledger.model_validate(data)
    return data  # type: ignore[no-any-return]


DAMAGED = {
    "claims-is-a-number": ('{"schema": "research-dispatch/claims@2", "claims": 5}', "field "),
    "clusters-of-wrong-type": (None, "field clusters.0.members"),
    "truncated": (None, "unreadable (JSONDecodeError"),
    "a-list": ("[1, 2, 3]", "has schema none"),
    "old-schema-with-junk": ('{"schema": "research-dispatch/claims@1", "clusters": [{"key": 5}]}',
                             "field clusters.0.key"),
}


@reliability(area="input", case="damaged previous claims ledger ({id})",
             expect="a warning names framework/claims.json and the field, the synthesis goes on as if there were "
                    "no previous ledger (the diff calls everything new), exit 0, the new ledger is valid; never "
                    "'internal error'")
@pytest.mark.parametrize("kind", sorted(DAMAGED))
def test_a_damaged_previous_ledger_is_a_warning_and_the_synthesis_goes_on(planted: Path, synth_env, kind: str) -> None:
    first = synthesize_cli(planted, synth_env)
    clean_run(first)
    path = planted / "framework" / "claims.json"
    good = path.read_text(encoding="utf-8")
    text, fragment = DAMAGED[kind]
    if kind == "clusters-of-wrong-type":
        data = json.loads(good)
        data["clusters"][0]["members"] = "not a list"
        text = json.dumps(data)
    elif kind == "truncated":
        text = good[: len(good) // 2]
    path.write_text(text or "", encoding="utf-8")
    result = synthesize_cli(planted, synth_env)
    clean_run(result)
    [warning] = [line for line in result.stdout.splitlines() if "previous ledger" in line]
    assert warning.startswith("warning: framework/claims.json: previous ledger") and fragment in warning, warning
    assert "compares against nothing" in warning
    assert "0 dropped" in result.stdout and "9 new" in result.stdout and "1 new divergences" in result.stdout
    assert valid_ledger(planted)["clusters"]


@reliability(area="input", case="damaged synthesis cache entry (wrong types, truncated, calls not call records)",
             expect="a warning names the cache file and the field, the answer is asked for again, exit 0; never "
                    "'internal error'")
def test_a_damaged_cache_entry_is_a_warning_and_the_answer_is_asked_again(planted: Path, synth_env, gateway) -> None:
    clean_run(synthesize_cli(planted, synth_env))
    (planted / "framework" / "claims.json").unlink()  # no replay from the ledger: the cache is the only copy
    entries = sorted((planted / "build" / "synthesis-cache" / "extract").glob("*.json"))
    assert len(entries) == 6
    damage = [
        lambda d: {**d, "answer": 5},
        lambda d: {**d, "calls": 5},
        lambda d: {**d, "calls": [{"not": "a call record"}]},
        lambda d: {**d, "dropped_citations": "many"},
    ]
    for path, change in zip(entries, damage, strict=False):
        path.write_text(json.dumps(change(json.loads(path.read_text(encoding="utf-8")))), encoding="utf-8")
    entries[4].write_text(entries[4].read_text(encoding="utf-8")[:40], encoding="utf-8")  # truncated
    gateway.reset()
    result = synthesize_cli(planted, synth_env)
    clean_run(result)
    warnings = [line for line in result.stdout.splitlines() if "damaged synthesis cache entry" in line]
    assert len(warnings) == 5
    assert all("build/synthesis-cache/extract/" in w and "asked for again" in w for w in warnings)
    assert any("field answer" in w for w in warnings) and any("field calls" in w for w in warnings)
    assert any("unreadable" in w for w in warnings)
    assert "LLM calls: 5 (5 extraction, 1 cached" in result.stdout  # the five damaged ones, asked again
    valid_ledger(planted)


@pytest.mark.slow
@reliability(area="budget", case="synthesis time limit reached before any report was extracted",
             expect="exit 1 with one line saying so; nothing is written (no framework file, no partial file)")
def test_a_time_limit_with_nothing_extracted_writes_nothing(planted: Path, synth_env, gateway) -> None:
    write_pyproject(planted, ", timeout_minutes = 0.05")
    gateway.set_scenario({"rules": [{"match": {"schema": "claim_extraction"}, "delay_s": 60}]})
    result = synthesize_cli(planted, synth_env)
    assert result.code == 1 and "Traceback" not in result.stderr
    assert "every extraction failed" in result.stderr and "time limit" in result.stderr
    assert not (planted / "framework").exists()


@pytest.mark.slow
@reliability(area="budget", case="synthesis time limit reached while a citation check is running",
             expect="exit 0 on time; the report's checks are timed_out, their citations unsupported with the reason, "
                    "`incomplete` names the report; nothing of it is cached, so the next run checks it")
def test_the_time_limit_during_a_citation_check_is_named(planted: Path, synth_env, gateway) -> None:
    write_pyproject(planted, ", timeout_minutes = 0.05")
    gateway.set_scenario({"rules": [{"match": {"schema": "citation_check", "session": "*:cite-02-beta-*"},
                                     "delay_s": 60}]})
    started = time.monotonic()
    result = synthesize_cli(planted, synth_env)
    assert time.monotonic() - started < 45
    clean_run(result)
    data = valid_ledger(planted)
    beta = next(c for c in data["citation_checks"] if c["report"] == "02-beta")
    assert beta["status"] == "timed_out" and beta["items"]
    assert all(i["support"] == "unsupported" and "time limit" in i["reason"] for i in beta["items"])
    assert any("citations of these reports were all checked" in item and "02-beta" in item
               for item in data["incomplete"])
    gateway.set_scenario({})
    write_pyproject(planted)
    again = synthesize_cli(planted, synth_env)
    clean_run(again)
    data = valid_ledger(planted)
    assert "(0 extraction, 6 cached; 1 citation check" in again.stdout and data["incomplete"] == []
    assert all(i["support"] == "supported" for c in data["citation_checks"] for i in c["items"])


@reliability(area="input", case="damaged citation-check cache entry",
             expect="a warning names build/synthesis-cache/cite/<key>.json and the field; the citation is asked again "
                    "and decided as before; exit 0")
def test_a_damaged_citation_cache_entry_is_asked_again(planted: Path, synth_env, gateway) -> None:
    clean_run(synthesize_cli(planted, synth_env))
    before = valid_ledger(planted)
    (planted / "framework" / "claims.json").unlink()  # only the build cache can replay now
    [entry, *_] = sorted((planted / "build" / "synthesis-cache" / "cite").glob("*.json"))
    data = json.loads(entry.read_text(encoding="utf-8"))
    entry.write_text(json.dumps({**data, "answer": {"verdict": "maybe", "passage": None, "quote": None}}),
                     encoding="utf-8")
    gateway.reset()
    result = synthesize_cli(planted, synth_env)
    clean_run(result)
    [warning] = [line for line in result.stdout.splitlines() if "damaged synthesis cache entry" in line]
    assert f"build/synthesis-cache/cite/{entry.name}" in warning and "asked for again" in warning
    assert "1 citation check" in result.stdout
    after = valid_ledger(planted)
    assert [c["citations"] for c in after["claims"]] == [c["citations"] for c in before["claims"]]
