"""Two reports that ask the synthesis one question: each rests on its own calls, and a re-run rewrites nothing.

Two legs of one topic can write alike (the fakes write the same canned text for every model; real models
can quote one source alike): their extraction requests and citation checks then have one request key.
Each report's question is asked by its own call; the build cache keeps one answer per key. A replay
from it gave both reports the same call, so an unchanged re-run rewrote `claims.json` and the call log,
and the cost the PR shows changed though no call was made (issue 30, point 5).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.synthesis.conftest import PLANTED, write_pyproject, write_report

FRAMEWORK_FILES = ("planted.md", "claims.json", "synthesis.calls.jsonl")


def twins(tmp_path: Path) -> Path:
    """Two reports with one body (same title, same sentences, same evidence) by two families."""
    repo = tmp_path / "twins"
    repo.mkdir()
    write_pyproject(repo)
    _model, sentences, _route = PLANTED["01-alpha"]
    for stem, model in (("01-twin.deepseek-deepseek-v4-pro", "deepseek/deepseek-v4-pro"),
                        ("01-twin.openai-gpt-5", "openai/gpt-5")):
        write_report(repo, stem, model, sentences, title="Twin", topic="twin")
    return repo


def calls(repo: Path) -> list[dict[str, Any]]:
    lines = (repo / "framework" / "synthesis.calls.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


def test_each_report_rests_on_its_own_calls_and_a_rerun_writes_the_same_bytes(tmp_path: Path, run_synthesis,
                                                                              gateway: Any) -> None:
    repo = twins(tmp_path)
    first = run_synthesis(repo)
    made = len(gateway.completions)
    logged = calls(repo)
    assert len(logged) == made == first.llm_calls  # every call made is in the log, once
    assert len({c["generation_id"] for c in logged}) == made
    assert round(sum(c["cost_usd"] for c in logged), 6) == first.cost_usd  # the log says what was spent
    before = {name: (repo / "framework" / name).read_bytes() for name in FRAMEWORK_FILES}

    gateway.reset()
    second = run_synthesis(repo)
    assert gateway.completions == [] and second.llm_calls == 0
    assert {name: (repo / "framework" / name).read_bytes() for name in FRAMEWORK_FILES} == before
