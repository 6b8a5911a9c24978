"""`research`, `verify` (offline and `--online`), `collect` and `synthesize` as a user types them (in
process: tests/clirun.py), against the module's fake gateway and search server: the happy paths and
the documented exits 1, 2 and 3.

Two legs are researched once for the module: a good one (exported with `--export`, as the CI matrix job
does) and one the gateway served with another model than requested. Tests that change a repository work
on a copy.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests.bounds.conftest import child_env, make_repo, one_error
from tests.cli.conftest import Fakes, scripted
from tests.clirun import CliRun, run_cli

STEM = "02-diloco-family"
REQUESTED = "deepseek/deepseek-v4-pro"
SUBSTITUTE = "deepseek/deepseek-v3"


@dataclass(frozen=True)
class Researched:
    repo: Path
    done: CliRun
    export: Path | None = None


def research(parent: Path, fakes: Fakes, *, export: bool = False) -> Researched:
    """`research diloco-family` in a new repository (with `--export DIR` when asked, as the CI job runs it)."""
    repo = make_repo(parent, ("02-",))
    folder = parent / "artifact" if export else None
    argv = ["--export", str(folder)] if folder else []
    return Researched(repo, run_cli("research", "diloco-family", "--repo", str(repo), *argv, env=fakes.env()),
                      folder)


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory, fakes: Fakes) -> Researched:
    return research(tmp_path_factory.mktemp("good"), fakes, export=True)


@pytest.fixture(scope="module")
def substituted(tmp_path_factory: pytest.TempPathFactory, fakes: Fakes) -> Researched:
    with scripted(fakes, {"rules": [{"match": {"session": f"*:{STEM}"}, "serve_model": SUBSTITUTE}]}):
        return research(tmp_path_factory.mktemp("substituted"), fakes)


def copy(repo: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(repo, tmp_path / "repo", symlinks=True))


def test_research_writes_the_report_and_says_so(good: Researched) -> None:
    assert good.done.code == 0, good.done.output
    line = good.done.stdout.splitlines()[-1]
    assert re.fullmatch(rf"{STEM}: ok, route exact, \d+ words, \d+ sources, \d+ calls, \$\d+\.\d{{4}} → "
                        rf"research/{STEM}\.md", line), line
    assert (good.repo / "research" / f"{STEM}.md").is_file()
    assert (good.repo / "research" / f"{STEM}.calls.jsonl").is_file()
    assert good.export is not None and (good.export / "research" / f"{STEM}.md").is_file()


def test_collect_imports_an_exported_leg_at_its_computed_paths(good: Researched, tmp_path: Path) -> None:
    assert good.export is not None
    target = make_repo(tmp_path, ("02-",))
    done = run_cli("collect", str(good.export), "--repo", str(target), env=child_env())
    assert done.code == 0 and done.stderr == "", done.output
    assert re.fullmatch(r"imported \d+ file\(s\); missing: nothing\n", done.stdout), done.stdout
    for name in (f"{STEM}.md", f"{STEM}.calls.jsonl"):
        assert (target / "research" / name).read_bytes() == (good.repo / "research" / name).read_bytes()


def test_verify_online_rechecks_every_call_with_the_gateway(good: Researched, fakes: Fakes) -> None:
    done = run_cli("verify", "--online", "--repo", str(good.repo), env=fakes.env())
    assert done.code == 0, done.output
    assert "problem:" not in done.stdout and "exact" in done.stdout.splitlines()[1]


def test_verify_online_without_the_gateway_key_is_exit_2(good: Researched) -> None:
    done = run_cli("verify", "--online", "--repo", str(good.repo), env=child_env())
    assert done.code == 2 and done.stdout == "", done.output
    one_error(done.stderr, "OPENROUTER_API_KEY", "is not set")


def test_synthesize_without_the_gateway_key_is_exit_2_and_writes_nothing(good: Researched, tmp_path: Path) -> None:
    repo = copy(good.repo, tmp_path)
    done = run_cli("synthesize", "--repo", str(repo), env=child_env())
    assert done.code == 2, done.output
    one_error(done.stderr, "OPENROUTER_API_KEY", "is not set")
    assert not (repo / "framework").exists()


def test_a_failed_leg_is_exit_1_with_one_line_saying_why(tmp_path: Path, fakes: Fakes) -> None:
    with scripted(fakes, {"rules": [{"match": {"session": f"*:{STEM}"}, "status": 402}]}):
        failed = research(tmp_path, fakes)
    assert failed.done.code == 1, failed.done.output
    assert failed.done.stdout.startswith(f"{STEM}: failed — "), failed.done.stdout
    assert "Traceback" not in failed.done.output
    assert not (failed.repo / "research" / f"{STEM}.md").exists()
    status = json.loads((failed.repo / "build" / "legs" / f"{STEM}.json").read_text(encoding="utf-8"))
    assert status["status"] == "failed"


def test_another_model_serving_is_exit_3_for_research_and_for_verify(substituted: Researched) -> None:
    assert substituted.done.code == 3, substituted.done.output
    assert f"{STEM}: ok, route model_fallback" in substituted.done.stdout
    done = run_cli("verify", "--repo", str(substituted.repo), env=child_env())
    assert done.code == 3, done.output
    assert "model_fallback ⚠" in done.stdout and SUBSTITUTE in done.stdout


def test_verify_online_catches_a_call_log_that_lies(substituted: Researched, fakes: Fakes, tmp_path: Path) -> None:
    """The report and its call log are rewritten to claim the requested model served: offline `verify`
    cannot tell, `--online` asks the gateway's /generation records and exits 3 naming the call."""
    repo = copy(substituted.repo, tmp_path)
    report, calls = repo / "research" / f"{STEM}.md", repo / "research" / f"{STEM}.calls.jsonl"
    _, front, body = report.read_text(encoding="utf-8").split("---\n", 2)
    front = (front.replace(SUBSTITUTE, REQUESTED).replace("route: model_fallback", "route: exact")
             .replace("route_verified: false", "route_verified: true"))
    report.write_text(f"---\n{front}---\n{body}", encoding="utf-8")
    records = [json.loads(line) for line in calls.read_text(encoding="utf-8").splitlines()]
    for record in records:
        record.update(served_model=REQUESTED, verdict="exact")
    calls.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    offline = run_cli("verify", "--repo", str(repo), env=child_env())
    assert offline.code == 0, offline.output  # the forgery is consistent: only the gateway knows
    online = run_cli("verify", "--online", "--repo", str(repo), env=fakes.env())
    assert online.code == 3, online.output
    assert "model_fallback ⚠" in online.stdout
    assert f"gateway says model {SUBSTITUTE}, log says {REQUESTED}" in online.stderr


def test_an_unpinned_provider_fallback_is_verified(tmp_path: Path, fakes: Fakes) -> None:
    """docs/ARCHITECTURE.md § Route verdicts: no topic pins a provider, so OpenRouter serving some calls through a
    second provider after a failed first attempt (its router metadata shows both) is load balancing:
    `research` and `verify --online` exit 0, the route is exact, and both providers are recorded."""
    rule = {"match": {"session": f"*:{STEM}"}, "times": 2, "fallback_attempt": True, "serve_provider": "DeepInfra"}
    with scripted(fakes, {"rules": [rule]}):
        leg = research(tmp_path, fakes)
    assert leg.done.code == 0, leg.done.output
    assert f"{STEM}: ok, route exact" in leg.done.stdout
    calls = [json.loads(line) for line in
             (leg.repo / "research" / f"{STEM}.calls.jsonl").read_text(encoding="utf-8").splitlines()]
    fell_back = [c for c in calls if c["attempt"] == 2]
    assert len(fell_back) == 2 and all(c["attempts_recorded"] == 2 and c["served_provider"] == "DeepInfra"
                                       and c["verdict"] == "exact" for c in fell_back)
    front = (leg.repo / "research" / f"{STEM}.md").read_text(encoding="utf-8")
    assert "served_providers: [DeepInfra, DeepSeek]" in front and "route_verified: true" in front
    online = run_cli("verify", "--online", "--repo", str(leg.repo), env=fakes.env())
    assert online.code == 0, online.output
    assert "problem:" not in online.output and " exact " in online.stdout.splitlines()[1]


@pytest.mark.slow
def test_a_timed_out_call_s_cost_is_in_the_call_log_and_the_leg_s_spend(tmp_path: Path, fakes: Fakes) -> None:
    """The report's stream stalls past `gateway.timeout_s`: `research` abandons it — OpenRouter
    stops billing a cancelled stream at what it had streamed — and retries. The abandoned call is a line
    of the call log (`aborted: true`) at the cost the gateway's `/generation` record gives; the front
    matter's model spend (`usage.cost_usd`) is the call log's sum, and the status file's spend is that plus
    the search services' credits (issue 32.6: every paid call counted, the abandoned one included)."""
    repo = make_repo(tmp_path, ("02-",))
    with (repo / "pyproject.toml").open("w", encoding="utf-8") as config:
        config.write('[tool.research-dispatch]\nframework_name = "composer-replication-framework"\n'
                     "gateway = {backoff_base_s = 0.0, backoff_max_s = 0.0, timeout_s = 1.0}\n")
    rule = {"match": {"session": f"*:{STEM}", "kind": "write"}, "times": 1, "stall_s": 10.0}
    with scripted(fakes, {"rules": [rule]}):
        done = run_cli("research", "diloco-family", "--repo", str(repo), env=fakes.env())
    assert done.code == 0, done.output
    calls = [json.loads(line) for line in
             (repo / "research" / f"{STEM}.calls.jsonl").read_text(encoding="utf-8").splitlines()]
    (abandoned,) = [c for c in calls if c["aborted"]]
    billed = fakes.gateway.generations[abandoned["generation_id"]]
    assert billed["cancelled"] and abandoned["cost_usd"] == billed["total_cost"] > 0
    assert abandoned["verdict"] == "aborted" and not abandoned["cost_estimated"]
    total = round(sum(c["cost_usd"] for c in calls), 6)
    front = (repo / "research" / f"{STEM}.md").read_text(encoding="utf-8")
    meta = yaml.safe_load(front.split("---\n", 2)[1])
    assert meta["usage"]["cost_usd"] == total and meta["route"] == "exact"
    search = meta["search"]["cost_usd"]
    assert search > 0  # the leg's searches were priced (Tavily credits)
    status = json.loads((repo / "build" / "legs" / f"{STEM}.json").read_text(encoding="utf-8"))
    assert status["cost_usd"] == round(total + search, 6) and status["calls"] == len(calls)
    assert run_cli("verify", "--repo", str(repo), env=child_env()).code == 0  # the log still verifies
