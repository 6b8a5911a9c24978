"""`--json` on check, verify, run and demo (issue 24): one JSON document on stdout, nothing else there
(narration goes to stderr), with the shape the README documents. Every command runs as a user types it
(in process: tests/clirun.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from research_dispatch_fakes.gateway import FakeGateway
from research_dispatch_fakes.tavily import FakeTavily
from tests.bounds.conftest import child_env, fake_env, make_repo
from tests.clirun import run_cli

CHECK_KEYS = {"schema", "ok", "topics", "legs", "online", "problems", "warnings", "checked"}
ROW_KEYS = {"report", "topic", "requested_model", "requested_provider", "served_models", "served_providers",
            "route", "verified", "status", "words", "calls", "cost_usd", "problems"}
RUN_KEYS = {"schema", "cycle", "exit_code", "interrupted", "cost_usd", "legs_cost_usd", "legs", "stage_errors",
            "synthesis", "publication", "wall_s", "error"}
RUN_LEG_KEYS = {"leg", "topic", "model", "this_run", "state", "note", "route", "words", "cost_usd", "report"}
DEMO_KEYS = {"schema", "ok", "exit_code", "run_exit_code", "source", "directory", "origin", "log", "wall_s",
             "checks", "pull_request"}


@pytest.fixture(scope="module")
def fake_services() -> Iterator[dict[str, str]]:
    with FakeGateway() as gateway, FakeTavily() as tavily:
        yield fake_env(gateway, tavily)


def test_check_json_with_and_without_problems(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, topics=("02",))
    done = run_cli("check", "--json", env=child_env(), cwd=repo)
    assert done.code == 0 and done.stderr == "", done.output
    document = json.loads(done.stdout)
    assert set(document) == CHECK_KEYS
    assert document | {} == {"schema": "research-dispatch/check@2", "ok": True, "topics": 1, "legs": 1,
                             "online": False, "problems": [], "warnings": [], "checked": []}
    (repo / "topics" / "09-bad.yaml").write_text("id: bad\ntitle: x\n", encoding="utf-8")
    done = run_cli("check", "--json", env=child_env(), cwd=repo)
    assert done.code == 2
    document = json.loads(done.stdout)
    assert document["ok"] is False and document["problems"][0]["file"] == "topics/09-bad.yaml"
    assert "topics/09-bad.yaml" in done.stderr  # the narration says it too


def test_run_and_verify_json(tmp_path: Path, fake_services: dict[str, str]) -> None:
    repo = make_repo(tmp_path, topics=("02",))
    env = child_env(fake_services)
    done = run_cli("run", "--no-publish", "--json", env=env, cwd=repo)
    assert done.code == 0, done.output
    document = json.loads(done.stdout)  # stdout is the document alone; the progress went to stderr
    assert set(document) == RUN_KEYS and document["schema"] == "research-dispatch/run@1"
    (leg,) = document["legs"]
    assert set(leg) == RUN_LEG_KEYS
    assert (leg["leg"], leg["this_run"], leg["route"], leg["report"]) == (
        "02-diloco-family", "ok", "exact", "research/02-diloco-family.md")
    assert document["synthesis"]["document"] == "framework/composer-replication-framework.md"
    assert document["publication"] is None and "step 1/" in done.stderr
    assert "synthesis: extraction 1/1 — " in done.stderr and "-minute cap" in done.stderr  # never silent

    done = run_cli("verify", "--json", env=env, cwd=repo)
    assert done.code == 0, done.output
    document = json.loads(done.stdout)
    assert document["verified"] is True and document["schema"] == "research-dispatch/verify@1"
    (row,) = document["reports"]
    assert set(row) == ROW_KEYS and row["route"] == "exact" and row["report"] == "research/02-diloco-family.md"
    assert "exact" in done.stderr  # the table, for people, on stderr


@pytest.mark.slow
def test_run_json_on_bad_input_is_still_one_document(tmp_path: Path) -> None:
    """Issue 31 (low): `run --json` that ends at bad input (exit 2) printed nothing on stdout; a caller
    parsing it now reads the same keys, nothing run, and the one line stderr says, as `check --json` does."""
    repo = make_repo(tmp_path, topics=("02",))
    for arguments, named in ((("--topics", ",,,"), "--topics"), (("--topics", "no-such-topic"), "no-such-topic"),
                             ((), "OPENROUTER_API_KEY")):
        done = run_cli("run", "--no-publish", "--json", *arguments, env=child_env(), cwd=repo)
        assert done.code == 2, done.output
        document = json.loads(done.stdout)
        assert set(document) == RUN_KEYS and document["schema"] == "research-dispatch/run@1"
        assert document["exit_code"] == 2 and document["legs"] == [] and document["cost_usd"] == 0.0
        assert named in document["error"] and document["error"] in done.stderr


@pytest.mark.slow
def test_demo_json(tmp_path: Path) -> None:
    done = run_cli("demo", "--dir", "demo", "--json", env=child_env(), cwd=tmp_path)
    assert done.code == 0, done.output
    document = json.loads(done.stdout)
    assert set(document) == DEMO_KEYS and document["ok"] is True and len(document["checks"]) >= 12
    assert all(check["ok"] for check in document["checks"])
    assert document["pull_request"]["number"] == 1 and "demo ok: " in done.stderr
