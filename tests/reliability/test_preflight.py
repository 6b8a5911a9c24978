"""Never pay for work that cannot be kept (issue 21.1, 21.5): what could refuse later is refused first.

Every case runs the installed console script as a user does — a fresh interpreter per command, the fake
gateway and search servers on 127.0.0.1, real git where the case publishes — and shows the refusal
comes before the first paid call: exit 2, one line naming the file (or option) and the field, and the
gateway has answered no chat completion. The inputs are the findings of the issue, each of which was
paid for and then lost (or refused) on the main branch before this change.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.bounds.conftest import child_env, fake_env, git, make_repo, one_error
from tests.clirun import run_cli
from tests.reliability.userworld import BRANCH, TOPIC_IDS, UserWorld, user_world  # noqa: F401  (the fixture)

reliability = pytest.mark.reliability
TOPIC = "diloco-family"
STEM = "02-diloco-family"


def topic_yaml(topic_id: str, *models: str) -> str:
    listed = "".join(f"  - model: {model}\n" for model in models)
    return (f"id: {topic_id}\ntitle: A topic\nscope: |\n  Survey the topic.\nmodels:\n{listed}"
            "words: {min: 200, max: 400}\n")


def keys(gateway: Any, tavily: Any, **extra: str) -> dict[str, str]:
    return child_env({**fake_env(gateway, tavily), **extra})


def committed(repo: Path) -> Path:
    """`repo` as a git repository with one commit (what `run` publishes to a local branch from)."""
    (repo / ".gitignore").write_text("build/\n", encoding="utf-8")
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "topics")
    return repo


def refused_before_any_call(done: Any, gateway: Any, *fragments: str) -> str:
    assert done.code == 2, done.output
    assert len(gateway.completions) == 0, "a model call was made before the refusal"
    return one_error(done.stderr, *fragments)


# -- two legs, one path ------------------------------------------------------------------------------
def same_topic(repo: Path) -> tuple[str, str]:
    (repo / "topics" / "01-a.yaml").write_text(topic_yaml("a", "openai-x/gpt-5", "openai/x-gpt-5"), encoding="utf-8")
    return "topics/01-a.yaml: models[1]", "topics/01-a.yaml models[0] (openai-x/gpt-5)"


def two_topics(repo: Path) -> tuple[str, str]:
    (repo / "topics" / "01-a.yaml").write_text(topic_yaml("a", "openai/gpt-5", "anthropic/claude-sonnet-4.6"),
                                               encoding="utf-8")
    (repo / "topics" / "01-a.openai-gpt-5.yaml").write_text(topic_yaml("a.openai-gpt-5", "deepseek/deepseek-v3.2"),
                                                            encoding="utf-8")
    return "topics/01-a.openai-gpt-5.yaml: models[0]", "topics/01-a.yaml models[0] (openai/gpt-5)"


@reliability(area="input", case="two legs compute one report path ({id}), through check, plan and run",
             expect="exit 2 before any call, one line naming both topic files and the field (e.g. topics/01-a.yaml: "
                    "models[1] … also computed for topics/01-a.yaml models[0]); check and plan refuse alike")
@pytest.mark.parametrize("layout", [same_topic, two_topics], ids=["models openai-x/gpt-5 and openai/x-gpt-5",
                                                                 "topic a + openai/gpt-5 and topic a.openai-gpt-5"])
def test_two_legs_that_would_write_one_report_are_refused(tmp_path: Path, gateway: Any, tavily: Any,
                                                          layout: Any) -> None:
    repo = make_repo(tmp_path, topics=("none",))
    second, first = layout(repo)
    for command in (("check",), ("plan",), ("run", "--no-publish")):
        done = run_cli(*command, "--repo", str(repo), env=keys(gateway, tavily))
        line = refused_before_any_call(done, gateway, second, first, "research/01-a.openai")
        assert "rename a topic id or change one model" in line, line


# -- configured directories ------------------------------------------------------------------------
@reliability(area="input", case="research_dir = \"research/\" and framework_dir = \"./framework/\"",
             expect="normalised to research and framework: run commits research/02-diloco-family.md and "
                    "framework/… to the local refresh branch (no 'research//…' path git refuses)")
def test_directories_spelled_with_slashes_are_normalised(tmp_path: Path, gateway: Any, tavily: Any) -> None:
    repo = committed(make_repo(tmp_path, topics=("02-",), extra_config='research_dir = "research/"\n'
                                                                        'framework_dir = "./framework/"\n'))
    done = run_cli("run", "--repo", str(repo), env=keys(gateway, tavily))
    assert done.code == 0, done.output
    files = git(repo, "ls-tree", "-r", "--name-only", BRANCH).split()
    assert f"research/{STEM}.md" in files and "framework/claims.json" in files, files
    assert not any("//" in name or name.startswith("./") for name in files)


@reliability(area="input", case="a directory setting that cannot hold reports: {id}",
             expect="check and run refuse it, exit 2 naming pyproject.toml and the setting, before any call")
@pytest.mark.parametrize(("setting", "message"), [
    ('research_dir = "."', "top level"), ('research_dir = ".git"', "inside .git"),
    ('framework_dir = "research"', "overlaps research_dir"), ('build_dir = "research/build"', "overlaps research_dir"),
], ids=["research_dir = .", "research_dir = .git", "framework_dir = research", "build_dir inside research"])
def test_directories_that_cannot_be_committed_are_refused(tmp_path: Path, gateway: Any, tavily: Any, setting: str,
                                                          message: str) -> None:
    repo = make_repo(tmp_path, topics=("02-",), extra_config=setting + "\n")
    field = "tool.research-dispatch." + setting.split(" ", 1)[0]
    for command in (("check",), ("run", "--no-publish")):
        done = run_cli(*command, "--repo", str(repo), env=keys(gateway, tavily))
        refused_before_any_call(done, gateway, "pyproject.toml", field, message)


# -- the cycle as the branch it names -------------------------------------------------------------------
@reliability(area="input", case="a cycle git refuses as a branch name: --cycle {id}",
             expect="plan, research and run refuse it, exit 2 naming --cycle, before any call (git check-ref-format's "
                    "rules)")
@pytest.mark.parametrize("cycle", ["abc.", "a.lock"])
def test_a_cycle_git_refuses_as_a_branch_is_refused_first(tmp_path: Path, gateway: Any, tavily: Any,
                                                          cycle: str) -> None:
    repo = make_repo(tmp_path, topics=("02-",))
    for command in (("plan",), ("research", TOPIC), ("run", "--no-publish")):
        done = run_cli(*command, "--repo", str(repo), "--cycle", cycle, env=keys(gateway, tavily))
        refused_before_any_call(done, gateway, "--cycle", repr(cycle))


# -- export targets ------------------------------------------------------------------------------------
@reliability(area="input", case="research --export {id}",
             expect="exit 2 naming --export before any call (it would copy the leg's files onto themselves, or "
                    "among the repository's reports)")
@pytest.mark.parametrize("target", [".", "research", "repo-link"], ids=[".", "research", "a link to the repository"])
def test_an_export_target_that_cannot_hold_copies_is_refused(tmp_path: Path, gateway: Any, tavily: Any,
                                                             target: str) -> None:
    repo = make_repo(tmp_path, topics=("02-",))
    (repo / "research").mkdir()
    if target == "repo-link":
        os.symlink(repo, tmp_path / "repo-link")
        target = str(tmp_path / "repo-link")
    done = run_cli("research", "--repo", str(repo), TOPIC, "--export", target, env=keys(gateway, tavily), cwd=repo)
    refused_before_any_call(done, gateway, "--export")
    assert not (repo / "research" / f"{STEM}.md").exists()


# -- symbolic links on the way of a leg's files ---------------------------------------------------------
@reliability(area="input", case="a symbolic link where a leg writes: {id}",
             expect="research and run refuse it, exit 2 naming the link and its setting, before any call; nothing "
                    "is written through it")
@pytest.mark.parametrize("link", ["build/traces", "build", "research/02-diloco-family.md"],
                         ids=["build/traces → outside", "build → outside", "a report → outside"])
def test_a_symlink_on_a_legs_paths_is_refused_first(tmp_path: Path, gateway: Any, tavily: Any, link: str) -> None:
    repo = make_repo(tmp_path, topics=("02-",))
    outside = tmp_path / "outside"
    outside.mkdir()
    path = repo / link
    path.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(outside / "x.md" if link.endswith(".md") else outside, path)
    setting = "research_dir" if link.startswith("research") else "build_dir"
    for command in (("research", TOPIC), ("run", "--no-publish")):
        done = run_cli(*command, "--repo", str(repo), env=keys(gateway, tavily))
        refused_before_any_call(done, gateway, f"{link}: {setting}: is a symbolic link")
    assert list(outside.iterdir()) == []


# -- publishing: a closed PR of the cycle -----------------------------------------------------------------
@reliability(area="publish", case="run --push when the cycle's PR was closed without merging",
             expect="exit 2 before any leg, naming --cycle and PR #1, saying to reopen it, name another cycle or "
                    "run without --push; no call made, nothing pushed")
def test_run_push_with_a_closed_pr_of_the_cycle_is_refused_before_the_legs(user_world: UserWorld) -> None:  # noqa: F811
    clone = user_world.clone()
    git(clone, "push", "-q", "origin", f"main:{BRANCH}")
    user_world.github.seed_pull(head=BRANCH, title="closed by a reviewer", state="closed")
    before = user_world.origin_git("rev-parse", BRANCH)
    done = user_world.cli(clone, "run", "--topics", TOPIC_IDS["A"], "--push")
    assert done.code == 2, done
    assert len(user_world.gateway.completions) == 0
    line = one_error(done.output, "--cycle", "PR #1", "closed without merging")
    assert "Reopen PR #1" in line and "without --push" in line
    assert user_world.origin_git("rev-parse", BRANCH) == before


# -- budgets ---------------------------------------------------------------------------------------------
@reliability(area="budget", case="a budget no leg could meet or that YAML reads as text: {id}",
             expect="check and run refuse it, exit 2 naming the topic file and budget field with the reason, before "
                    "any call")
@pytest.mark.parametrize(("budget", "reason"), [
    ("{timeout_minutes: 1e-9}", "write it as 1.0e-9"),  # YAML 1.1: no dot, so text
    ("{timeout_minutes: 1.0e-9}", "shorter than any leg can take"),
    ("{max_cost_usd: 1e308}", "YAML 1.1 (PyYAML) needs a dot and a signed exponent"),
    ("{max_cost_usd: 0.00001}", "cannot pay for any leg"),
], ids=["timeout_minutes: 1e-9", "timeout_minutes: 1.0e-9", "max_cost_usd: 1e308", "max_cost_usd: 0.00001"])
def test_budgets_no_leg_could_meet_are_refused(tmp_path: Path, gateway: Any, tavily: Any, budget: str,
                                               reason: str) -> None:
    repo = make_repo(tmp_path, topics=("02-",))
    path = repo / "topics" / f"{STEM}.yaml"
    text = path.read_text(encoding="utf-8")
    path.write_text("\n".join(line for line in text.splitlines() if not line.startswith("budget:"))
                    + f"\nbudget: {budget}\n", encoding="utf-8")
    field = "budget." + budget.strip("{}").split(":", 1)[0]
    for command in (("check",), ("run", "--no-publish")):
        done = run_cli(*command, "--repo", str(repo), env=keys(gateway, tavily))
        refused_before_any_call(done, gateway, f"topics/{STEM}.yaml", field, reason)


@reliability(area="budget", case="caps above what a GitHub-hosted job can hold: {id}",
             expect="check refuses them (exit 2 naming the file and field, the 360-minute limit and the job's margin); "
                    "plan --github-output refuses them before writing any output")
@pytest.mark.parametrize(("where", "config"), [
    ("topic", ""), ("pyproject.toml", "synthesis = {timeout_minutes = 355}\n"),
], ids=["a leg's timeout_minutes: 355", "synthesis.timeout_minutes = 355"])
def test_caps_above_the_job_limit_are_refused_by_check(tmp_path: Path, where: str, config: str) -> None:
    repo = make_repo(tmp_path, topics=("02-",), extra_config=config)
    if where == "topic":
        path = repo / "topics" / f"{STEM}.yaml"
        lines = [line for line in path.read_text(encoding="utf-8").splitlines() if not line.startswith("budget:")]
        path.write_text("\n".join(lines) + "\nbudget: {timeout_minutes: 355}\n", encoding="utf-8")
        fragments = (f"topics/{STEM}.yaml", "budget.timeout_minutes")
    else:
        fragments = ("pyproject.toml", "tool.research-dispatch.synthesis.timeout_minutes")
    done = run_cli("check", "--repo", str(repo), env=child_env())
    assert done.code == 2, done.output
    one_error(done.stderr, *fragments, "360 minutes", "10-minute margin")
    output = tmp_path / "github_output"
    done = run_cli("plan", "--repo", str(repo), "--github-output", env=child_env({"GITHUB_OUTPUT": str(output)}))
    assert done.code == 2, done.output
    one_error(done.stderr, *fragments)
    assert output.read_text(encoding="utf-8") == ""


# -- inputs hashed as meaning ------------------------------------------------------------------------------
@reliability(area="crash", case="a topic file changed only in form: {id}",
             expect="the next run keeps the leg ('good report …, inputs unchanged'), no call made")
@pytest.mark.parametrize("change", ["CRLF line endings", "a comment and reflowed YAML"])
def test_a_change_of_form_only_pays_for_no_leg_again(tmp_path: Path, gateway: Any, tavily: Any, change: str) -> None:
    repo = make_repo(tmp_path, topics=("02-",))
    env = keys(gateway, tavily)
    first = run_cli("run", "--repo", str(repo), "--no-publish", env=env)
    assert first.code == 0, first.output
    calls = len(gateway.completions)
    path = repo / "topics" / f"{STEM}.yaml"
    text = path.read_text(encoding="utf-8")
    if change == "CRLF line endings":
        path.write_bytes(text.replace("\n", "\r\n").encode("utf-8"))
    else:  # the same fields, other spelling: a comment, quotes, key order
        data = yaml.safe_load(text)
        path.write_text("# reviewed 2026-12-01\n" + yaml.safe_dump(dict(reversed(list(data.items()))),
                                                                   default_style='"'), encoding="utf-8")
    second = run_cli("run", "--repo", str(repo), "--no-publish", env=env)
    assert second.code == 0, second.output
    assert len(gateway.completions) == calls, "the leg was paid for again"
    assert "inputs unchanged" in second.output, second.output

