"""Matrix planning: one entry per leg up to 256, packed batches beyond, GITHUB_OUTPUT writing."""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

from research_dispatch.config.plan import current_cycle, matrix, plan_legs, resolve_legs
from research_dispatch.config.settings import load_settings
from research_dispatch.config.topics import load_topics
from tests.clirun import run_cli
from tests.conftest import write_topic


def make_topics(repo: Path, count: int, models_per_topic: int) -> None:
    models = "".join(f"  - model: author{m}/model-{m}\n" for m in range(models_per_topic))
    for i in range(count):
        write_topic(repo, f"{i % 100:02d}-t{i}.yaml", f"id: t{i}\ntitle: T{i}\nscope: s\nmodels:\n{models}")


def test_plan_prints_matrix(repo: Path) -> None:
    result = run_cli("plan", "--repo", str(repo), "--topics", "verl-trl,composer-2.5")
    assert result.code == 0, result.output
    document = json.loads(result.output)
    assert document["include"] == [
        {"leg": "01-composer-2.5", "model": "google/gemini-3.1-pro-preview", "topic": "composer-2.5"},
        {"leg": "04-verl-trl", "model": "anthropic/claude-sonnet-4.6", "topic": "verl-trl"}]
    assert document["worst_case_usd"] == 6.0  # two legs at the default $3.00 cap


def test_plan_json_carries_the_worst_case_and_the_estimate_beside_the_matrix(repo: Path, tmp_path: Path) -> None:
    """Issue 30.7: a script sees what a plan may cost; the matrix's consumers see the same `include`, and
    the workflow's `matrix=` output stays the matrix alone (any other key would be a matrix dimension)."""
    out = tmp_path / "out"
    result = run_cli("plan", "--repo", str(repo), "--json", "--github-output",
                     env={**os.environ, "GITHUB_OUTPUT": str(out)})
    assert result.code == 0, result.output
    document = json.loads(result.output)
    assert set(document) == {"include", "worst_case_usd", "estimate_usd", "unpriced_models"}
    assert document["worst_case_usd"] == 15.0  # five legs at $3.00, under the $50.00 run budget
    assert document["estimate_usd"] is None or 0 < document["estimate_usd"] < document["worst_case_usd"] * 10
    written = out.read_text(encoding="utf-8").splitlines()
    assert json.loads(written[written.index(next(w for w in written if w.startswith("matrix<<"))) + 1]) == \
        {"include": document["include"]}


def test_plan_json_estimate_is_null_when_no_leg_is_priced(tmp_path: Path) -> None:
    repo = tmp_path / "unpriced"
    write_topic(repo, "01-new.yaml", "id: new\ntitle: New\nscope: s\nmodels:\n  - model: acme/unreleased-1\n"
                                     "  - model: zeta/unreleased-2\n")
    result = run_cli("plan", "--repo", str(repo), "--json")
    assert result.code == 0, result.output
    document = json.loads(result.output)
    assert document["estimate_usd"] is None and document["worst_case_usd"] == 6.0
    assert {"acme/unreleased-1", "zeta/unreleased-2"} <= set(document["unpriced_models"])


def test_plan_github_output(repo: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = run_cli("plan", "--repo", str(repo), "--github-output", "--cycle", "2027-H1",
                     env={**os.environ, "GITHUB_OUTPUT": str(out)})
    assert result.code == 0, result.output
    text = out.read_text()
    lines = text.splitlines()
    values = {}
    i = 0
    while i < len(lines):
        key, delim = lines[i].split("<<")
        values[key] = lines[i + 1]
        assert lines[i + 2] == delim
        i += 3
    assert json.loads(values["matrix"])["include"][0]["leg"] == "01-composer-2.5"
    assert values["count"] == "5" and values["cycle"] == "2027-H1"


def test_plan_unknown_topic_is_bad_input(repo: Path) -> None:
    result = run_cli("plan", "--repo", str(repo), "--topics", "nope")
    assert result.code == 2 and "nope" in result.stderr


def test_more_than_256_legs_are_packed(tmp_path: Path) -> None:
    repo = tmp_path / "big"
    make_topics(repo, 100, 3)
    settings = load_settings(repo)
    legs = plan_legs(load_topics(repo, settings), settings)
    assert len(legs) == 300
    entries = matrix(legs)["include"]
    assert len(entries) <= 256
    covered = [(t, m) for e in entries for t, m in zip(e["topic"].split(","), e["model"].split(","), strict=True)]
    assert sorted(covered) == sorted((leg.topic.id, leg.route.model) for leg in legs)
    assert len({e["leg"] for e in entries}) == len(entries)
    batch = entries[0]
    resolved = resolve_legs(load_topics(repo, settings), settings, batch["topic"], batch["model"])
    assert [(leg.topic.id, leg.route.model) for leg in resolved] == list(
        zip(batch["topic"].split(","), batch["model"].split(","), strict=True))


def test_cycle_names() -> None:
    assert current_cycle(dt.datetime(2026, 6, 30)) == "2026-H1"
    assert current_cycle(dt.datetime(2026, 7, 1)) == "2026-H2"
