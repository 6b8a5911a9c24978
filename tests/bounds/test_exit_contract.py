"""The exit-code contract everywhere (issue 11, build 4): bad environment and damaged input are exit 2
with one line naming the variable, file and field — checked before any work — never "internal error".

Every case runs the CLI as a user types it, with an explicit environment (in process: tests/clirun.py).
"Before any work" is checked from the outside: the fake gateway saw no model call, no matrix was printed,
no commit was made.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from research_dispatch_fakes.gateway import FakeGateway
from research_dispatch_fakes.tavily import FakeTavily
from tests.bounds.conftest import CYCLE, child_env, fake_env, git, make_repo, one_error
from tests.clirun import run_cli
from tests.conftest import CANARY

reliability = pytest.mark.reliability
STEM = "02-diloco-family"


# ----------------------------------------------------------------------------------------------
# Runner files and output directories: checked before any work


def _bad_runner_path(kind: str, tmp_path: Path) -> str | None:
    if kind == "unset":
        return None
    if kind == "missing-directory":
        return str(tmp_path / "no" / "such" / "dir" / "out")
    if kind == "a-directory":
        (tmp_path / "adir").mkdir()
        return str(tmp_path / "adir")
    if kind == "under-a-file":
        (tmp_path / "afile").write_text("x")
        return str(tmp_path / "afile" / "out")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    return str(fifo)


RUNNER_PATHS = ["unset", "missing-directory", "a-directory", "under-a-file", "fifo"]


@reliability(area="bounds", case="`plan --github-output` with GITHUB_OUTPUT {id}",
             expect="exit 2 before any work (no matrix printed), one line naming GITHUB_OUTPUT")
@pytest.mark.parametrize("kind", RUNNER_PATHS)
def test_plan_checks_github_output_before_any_work(kind: str, tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    target = _bad_runner_path(kind, tmp_path)
    env = child_env({"GITHUB_OUTPUT": target} if target is not None else {})
    done = run_cli("plan", "--repo", str(repo), "--github-output", env=env)
    assert done.code == 2, done.output
    assert done.stdout.strip() == ""
    one_error(done.stderr, "GITHUB_OUTPUT")


@reliability(area="bounds", case="`{id} --github-summary` with GITHUB_STEP_SUMMARY in a missing directory",
             expect="exit 2 before any work (no model call, no commit), one line naming GITHUB_STEP_SUMMARY")
@pytest.mark.parametrize("command", ["verify", "synthesize", "publish"])
def test_github_summary_is_checked_before_any_work(command: str, tmp_path: Path, gateway: Any,
                                                   tavily: Any) -> None:
    repo = make_repo(tmp_path, ("02-",))
    env = child_env({**fake_env(gateway, tavily), "GITHUB_STEP_SUMMARY": str(tmp_path / "gone" / "summary.md")})
    args = [command, "--repo", str(repo), "--github-summary"] + (["--no-push"] if command == "publish" else [])
    done = run_cli(*args, env=env)
    assert done.code == 2, done.output
    one_error(done.stderr, "GITHUB_STEP_SUMMARY", "cannot append")
    assert gateway.completions == []


@reliability(area="bounds", case="`run` when the {id} directory cannot be written (a file stands in its place)",
             expect="exit 2 before any leg runs, one line naming the directory and its setting")
@pytest.mark.parametrize("setting", ["build", "research"])
def test_run_checks_its_output_directories_before_any_leg(setting: str, tmp_path: Path, gateway: Any,
                                                          tavily: Any) -> None:
    repo = make_repo(tmp_path, ("02-",))
    (repo / setting).write_text("not a directory\n")
    done = run_cli("run", "--repo", str(repo), "--no-publish", env=child_env(fake_env(gateway, tavily)))
    assert done.code == 2, done.output
    one_error(done.stderr, f"{setting}: {setting}_dir:", "cannot write")
    assert gateway.completions == []


@reliability(area="bounds", case="`research --export DIR` where DIR cannot be created",
             expect="exit 2 before the leg runs, one line naming --export")
def test_research_checks_the_export_directory_before_the_leg(tmp_path: Path, gateway: Any, tavily: Any) -> None:
    repo = make_repo(tmp_path, ("02-",))
    (tmp_path / "afile").write_text("x")
    done = run_cli("research", "diloco-family", "--repo", str(repo), "--export", str(tmp_path / "afile" / "out"),
                   env=child_env(fake_env(gateway, tavily)))
    assert done.code == 2, done.output
    one_error(done.stderr, "--export", "cannot write")
    assert gateway.completions == []


# ----------------------------------------------------------------------------------------------
# Selections, keys and base URLs


@reliability(area="bounds", case="an empty selection: `{id}`",
             expect="exit 2 naming the option; never read as 'all'")
@pytest.mark.parametrize("args", [("plan", "--topics", ",,,"), ("plan", "--models", " "),
                                  ("run", "--topics", ",,,"), ("collect", "--models", ", ,")],
                         ids=["plan --topics ',,,'", "plan --models ' '", "run --topics ',,,'",
                              "collect --models ', ,'"])
def test_empty_selections_are_bad_input(args: tuple[str, ...], tmp_path: Path, gateway: Any, tavily: Any) -> None:
    repo = make_repo(tmp_path)
    extra = [str(tmp_path)] if args[0] == "collect" else []
    done = run_cli(args[0], *extra, "--repo", str(repo), *args[1:], env=child_env(fake_env(gateway, tavily)))
    assert done.code == 2, done.output
    one_error(done.stderr, args[1], "names nothing")
    assert gateway.completions == []


def test_an_empty_option_value_still_means_all(tmp_path: Path) -> None:
    """A workflow passes `--topics ""` when the input is empty: that is "all", as before."""
    repo = make_repo(tmp_path)
    done = run_cli("plan", "--repo", str(repo), "--topics", "", "--models", "", env=child_env())
    assert done.code == 0, done.output
    assert len(json.loads(done.stdout)["include"]) == 5


@reliability(area="bounds", case="bad credentials or endpoints: {id}",
             expect="exit 2 before any request, one line naming the variable")
@pytest.mark.parametrize("command,variable,value", [
    ("run", "OPENROUTER_API_KEY", "sk-or-abc\ndef"),
    ("run", "TAVILY_BASE_URL", "http://search.example.com"),
    ("publish", "GITHUB_TOKEN", "ghs_abc def"),
    ("publish", "GITHUB_API_URL", "http://api.github.example.com"),
], ids=["key-with-newline", "search-url-in-clear", "github-token-with-space", "github-api-in-clear"])
def test_bad_keys_and_base_urls_are_refused_before_any_request(command: str, variable: str, value: str,
                                                               tmp_path: Path, gateway: Any, tavily: Any) -> None:
    repo = make_repo(tmp_path, ("02-",))
    env = child_env({**fake_env(gateway, tavily), "GITHUB_TOKEN": CANARY["GITHUB_TOKEN"],
                     "GITHUB_REPOSITORY": "acme/review", "GITHUB_API_URL": "http://127.0.0.1:9", variable: value})
    args = ["run", "--no-publish"] if command == "run" else ["publish"]
    done = run_cli(*args, "--repo", str(repo), env=env)
    assert done.code == 2, done.output
    one_error(done.stderr, variable)
    assert gateway.completions == [] and tavily.calls == []


# ----------------------------------------------------------------------------------------------
# Damaged inputs


@pytest.fixture(scope="module")
def good_leg(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A repository holding one good report, its call log and status file (made once per module)."""
    from research_dispatch.run.refresh import run_refresh

    repo = make_repo(tmp_path_factory.mktemp("good"), ("02-",))
    with FakeGateway() as gateway, FakeTavily() as tavily:
        outcome = run_refresh(repo, cycle=CYCLE, env=fake_env(gateway, tavily), echo=lambda _line: None,
                              synthesize=False, live=False)
    assert outcome.exit_code == 0
    yield repo


def _copy(repo: Path, tmp_path: Path) -> Path:
    target = tmp_path / "repo"
    shutil.copytree(repo, target)
    return target


CALL_LOG_DAMAGE = {
    "cost-nan": (lambda r: {**r, "cost_usd": float("nan")}, "cost_usd"),
    "tokens-as-string": (lambda r: {**r, "prompt_tokens": "12"}, "prompt_tokens"),
    "negative-cost": (lambda r: {**r, "cost_usd": -1.0}, "cost_usd"),
    "missing-verdict": (lambda r: {k: v for k, v in r.items() if k != "verdict"}, "verdict"),
    "cached-as-number": (lambda r: {**r, "cached": 1}, "cached"),
    "not-an-object": (lambda r: [r], "not an object"),
}


@reliability(area="bounds", case="`verify` with a damaged call-log line: {id}",
             expect="exit 2, one line naming the call log, the line and the field")
@pytest.mark.parametrize("damage", sorted(CALL_LOG_DAMAGE))
def test_a_damaged_call_log_line_is_bad_input_naming_the_field(damage: str, good_leg: Path, tmp_path: Path) -> None:
    repo = _copy(good_leg, tmp_path)
    path = repo / "research" / f"{STEM}.calls.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines()
    change, field = CALL_LOG_DAMAGE[damage]
    lines[1] = json.dumps(change(json.loads(lines[1])))  # NaN is written as Python's json does: NaN
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    done = run_cli("verify", "--repo", str(repo), env=child_env())
    assert done.code == 2, done.output
    one_error(done.stderr, f"research/{STEM}.calls.jsonl", "line 2", field)


FRONT_MATTER_DAMAGE = {
    "cost-nan": ("cost_usd: .nan", "usage.cost_usd"),
    "cost-as-string": ("cost_usd: '0.5'", "usage.cost_usd"),
    "negative-tokens": ("prompt_tokens: -3", "usage.prompt_tokens"),
    "tokens-as-bool": ("prompt_tokens: true", "usage.prompt_tokens"),
    "cost-infinite": ("cost_usd: .inf", "usage.cost_usd"),
}


@reliability(area="bounds", case="`verify` with damaged usage numbers in a report's front matter: {id}",
             expect="exit 2, one line naming the report and the field")
@pytest.mark.parametrize("damage", sorted(FRONT_MATTER_DAMAGE))
def test_damaged_usage_numbers_are_bad_input_naming_the_field(damage: str, good_leg: Path, tmp_path: Path) -> None:
    import re

    repo = _copy(good_leg, tmp_path)
    path = repo / "research" / f"{STEM}.md"
    replacement, field = FRONT_MATTER_DAMAGE[damage]
    key = replacement.split(":")[0]
    text, count = re.subn(rf"(usage: \{{[^}}]*?){key}: [^,}}]+", rf"\g<1>{replacement}", path.read_text("utf-8"),
                          count=1)
    assert count == 1
    path.write_text(text, encoding="utf-8")
    done = run_cli("verify", "--repo", str(repo), env=child_env())
    assert done.code == 2, done.output
    one_error(done.stderr, f"research/{STEM}.md", field)


@reliability(area="bounds", case="`run` with a damaged status file from an earlier run",
             expect="a warning naming the file and the field; the run goes on and redoes nothing it need not "
                    "(exit 0)")
def test_a_damaged_status_file_is_a_warning_and_the_run_goes_on(good_leg: Path, tmp_path: Path, gateway: Any,
                                                               tavily: Any) -> None:
    repo = _copy(good_leg, tmp_path)
    path = repo / "build" / "legs" / f"{STEM}.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "cost_usd": "lots"}), encoding="utf-8")
    done = run_cli("run", "--repo", str(repo), "--no-publish", env=child_env(fake_env(gateway, tavily)))
    assert done.code == 0, done.output
    assert f"warning: build/legs/{STEM}.json: ignoring a damaged status file (cost_usd: str 'lots'" in done.stdout
    assert "Traceback" not in done.output


@reliability(area="bounds", case="`collect` of an artifact whose status file and call log are damaged",
             expect="each file rejected with a line naming it and the field; nothing damaged is imported")
def test_collect_names_the_damaged_field(good_leg: Path, tmp_path: Path) -> None:
    incoming = tmp_path / "incoming"
    for rel in (f"research/{STEM}.md", f"research/{STEM}.calls.jsonl", f"build/legs/{STEM}.json"):
        (incoming / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(good_leg / rel, incoming / rel)
    status = incoming / "build" / "legs" / f"{STEM}.json"
    status.write_text(json.dumps({**json.loads(status.read_text()), "words": -5}), encoding="utf-8")
    calls = incoming / "research" / f"{STEM}.calls.jsonl"
    calls.write_text(calls.read_text().replace('"latency_s":', '"latency_s":NaN,"x":', 1), encoding="utf-8")
    target = make_repo(tmp_path / "target", ("02-",))
    done = run_cli("collect", str(incoming), "--repo", str(target), env=child_env())
    assert done.code == 1, done.output
    assert f"rejected: build/legs/{STEM}.json: words: -5 is negative" in done.stderr
    assert (f"rejected: research/{STEM}.calls.jsonl: line 1 is not a call record (latency_s: nan is not a "
            "finite") in done.stderr
    assert "Traceback" not in done.output and "internal error" not in done.output
    assert not (target / "build" / "legs" / f"{STEM}.json").exists()


# ----------------------------------------------------------------------------------------------
# Publishing preflight: before any leg spends money


@pytest.fixture
def git_repo(tmp_path: Path) -> Path:
    repo = make_repo(tmp_path, ("02-",))
    (repo / ".gitignore").write_text("build/\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "topics")
    return repo


def _publish_env(gateway: Any, tavily: Any) -> dict[str, str]:
    return child_env({**fake_env(gateway, tavily), "GITHUB_TOKEN": CANARY["GITHUB_TOKEN"],
                      "GITHUB_REPOSITORY": "acme/review", "GITHUB_API_URL": "http://127.0.0.1:9"})


@reliability(area="bounds", case="`run` (publishing) when the base branch does not exist",
             expect="exit 2 naming pr.base before any leg runs (no model call)")
def test_run_preflight_refuses_a_missing_base_branch(git_repo: Path, gateway: Any, tavily: Any) -> None:
    with (git_repo / "pyproject.toml").open("a") as handle:
        handle.write('pr = {base = "trunk"}\n')
    done = run_cli("run", "--repo", str(git_repo), env=_publish_env(gateway, tavily))
    assert done.code == 2, done.output
    one_error(done.stderr, "pr.base", "'trunk' not found")
    assert gateway.completions == []


@reliability(area="bounds", case="`run --push` when the remote is unreachable",
             expect="exit 1 with one line saying the remote is not reachable and no leg was run (no model call)")
def test_run_preflight_refuses_an_unreachable_remote(git_repo: Path, tmp_path: Path, gateway: Any,
                                                     tavily: Any) -> None:
    git(git_repo, "remote", "add", "origin", str(tmp_path / "nowhere.git"))
    done = run_cli("run", "--repo", str(git_repo), "--push", env=_publish_env(gateway, tavily))
    assert done.code == 1, done.output
    one_error(done.stderr, "remote 'origin' is not reachable", "no leg was run")
    assert gateway.completions == []


@reliability(area="bounds", case="`run --push` when the base branch is missing on the remote",
             expect="exit 2 naming pr.base before any leg runs")
def test_run_preflight_refuses_a_base_branch_missing_on_the_remote(git_repo: Path, tmp_path: Path, gateway: Any,
                                                                   tavily: Any) -> None:
    origin = tmp_path / "origin.git"
    subprocess.run(["git", "init", "-q", "--bare", str(origin)], check=True)
    git(git_repo, "remote", "add", "origin", str(origin))
    git(git_repo, "push", "-q", "origin", "main:elsewhere")
    done = run_cli("run", "--repo", str(git_repo), "--push", env=_publish_env(gateway, tavily))
    assert done.code == 2, done.output
    one_error(done.stderr, "pr.base", "does not exist on remote 'origin'")
    assert gateway.completions == []


@reliability(area="bounds", case="`run` (publishing) when someone else committed to the refresh branch",
             expect="exit 1 naming the foreign commit before any leg runs (publish would refuse to overwrite it "
                    "after the money was spent)")
def test_run_preflight_refuses_foreign_commits_on_the_refresh_branch(git_repo: Path, gateway: Any,
                                                                     tavily: Any) -> None:
    branch = f"research-refresh/{CYCLE}"
    git(git_repo, "branch", branch)
    git(git_repo, "checkout", "-q", branch)
    (git_repo / "notes.md").write_text("a human note\n")
    git(git_repo, "add", "notes.md")
    git(git_repo, "commit", "-q", "-m", "human edit")
    git(git_repo, "checkout", "-q", "main")
    done = run_cli("run", "--repo", str(git_repo), env=_publish_env(gateway, tavily))
    assert done.code == 1, done.output
    one_error(done.stderr, f"the local branch {branch} has 1 commit(s) the bot did not make", "Test Human",
              "no leg was run")
    assert gateway.completions == []
