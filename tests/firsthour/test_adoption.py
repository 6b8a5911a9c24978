"""Adoption without loose ends (issue 24): Dependabot written by `init`, `publish --dry-run` before the
first commit, `--version` with its commit. Each command runs as a user types it (in process: tests/clirun.py).
(The wheel and sdist recording their commit, and `init` from the wheel pinning it: tests/adopt/test_installed.py.)
"""

from __future__ import annotations

from pathlib import Path

from research_dispatch.adopt.init import DEPENDABOT, template
from tests.adopt.conftest import empty_repository, git
from tests.bounds.conftest import child_env, one_error
from tests.clirun import run_cli

SHA = "b" * 40


def test_init_writes_dependabot_for_github_actions_and_keeps_a_repositorys_own(tmp_path: Path) -> None:
    repo = empty_repository(tmp_path / "review")
    done = run_cli("init", "--ref", SHA, env=child_env(), cwd=repo)
    assert done.code == 0, done.output
    assert (repo / DEPENDABOT).read_text(encoding="utf-8") == template("dependabot.yml")
    assert f"{DEPENDABOT}" in done.stdout
    again = run_cli("init", "--ref", SHA, env=child_env(), cwd=repo)
    assert again.code == 0 and "nothing to do" in again.stdout

    theirs = empty_repository(tmp_path / "theirs")
    (theirs / ".github").mkdir()
    own = "version: 2\nupdates:\n  - package-ecosystem: npm\n    directory: /\n    schedule: {interval: weekly}\n"
    (theirs / DEPENDABOT).write_text(own, encoding="utf-8")
    done = run_cli("init", "--ref", SHA, "--force", env=child_env(), cwd=theirs)
    assert done.code == 0, done.output
    assert (theirs / DEPENDABOT).read_text(encoding="utf-8") == own  # never overwritten, not even by --force
    assert "add a `package-ecosystem: github-actions` entry" in done.stdout


def test_publish_dry_run_before_the_first_commit_says_to_commit_first(tmp_path: Path) -> None:
    repo = empty_repository(tmp_path / "review")
    assert run_cli("init", "--ref", SHA, env=child_env(), cwd=repo).code == 0
    done = run_cli("publish", "--dry-run", env=child_env(), cwd=repo)
    assert done.code == 2, done.output
    one_error(done.stderr, "no commit yet", "commit first")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "Set up research-dispatch")
    done = run_cli("publish", "--dry-run", env=child_env(), cwd=repo)
    assert "no commit yet" not in done.output


def test_every_command_finds_the_repository_from_a_subdirectory_and_takes_c_as_repo(tmp_path: Path) -> None:
    repo = empty_repository(tmp_path / "review")
    assert run_cli("init", "--ref", SHA, env=child_env(), cwd=repo).code == 0
    done = run_cli("check", env=child_env(), cwd=repo / "topics")
    assert done.code == 0 and done.stdout.strip() == "ok: 1 topic(s), 2 leg(s)", done.output
    done = run_cli("plan", env=child_env(), cwd=repo / ".github" / "workflows")
    assert done.code == 0 and '"leg":"01-example.openai-gpt-5"' in done.stdout, done.output
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = run_cli("check", "-C", str(repo), env=child_env(), cwd=elsewhere)
    assert done.code == 0 and done.stdout.strip() == "ok: 1 topic(s), 2 leg(s)", done.output


def test_research_of_an_unknown_topic_lists_the_ids(tmp_path: Path) -> None:
    repo = empty_repository(tmp_path / "review")
    assert run_cli("init", "--ref", SHA, env=child_env(), cwd=repo).code == 0
    done = run_cli("research", "exmaple", env=child_env(), cwd=repo)
    assert done.code == 2
    one_error(done.stderr, "unknown topic id 'exmaple'", "did you mean 'example'?", "the topics are: example")


def test_all_missing_keys_are_named_in_one_message_with_where_to_get_them(tmp_path: Path) -> None:
    repo = empty_repository(tmp_path / "review")
    assert run_cli("init", "--ref", SHA, env=child_env(), cwd=repo).code == 0
    done = run_cli("research", "example", env=child_env(), cwd=repo)
    assert done.code == 2
    line = one_error(done.stderr, "OPENROUTER_API_KEY", "TAVILY_API_KEY", "2 keys are not set")
    assert "Keys page of your OpenRouter account" in line and "Tavily dashboard" in line


def test_check_names_misspelt_keys_with_a_did_you_mean_and_lists_every_problem(tmp_path: Path) -> None:
    repo = tmp_path / "review"
    (repo / "topics").mkdir(parents=True)
    (repo / "pyproject.toml").write_text("[tool.research-dispatch]\njbos = 3\n", encoding="utf-8")
    done = run_cli("check", env=child_env(), cwd=repo)
    assert done.code == 2
    # the topics are checked too, beside the config's problem (issue 30.2: a config error hid them)
    assert done.stderr.splitlines() == [
        "error: pyproject.toml: tool.research-dispatch.jbos: unknown key; did you mean jobs?",
        "error: topics/: no topic files (expected NN-<id>.yaml files; `research-dispatch init` writes an example)"]
    (repo / "pyproject.toml").write_text("[tool.research-dispatch]\n", encoding="utf-8")
    (repo / "topics" / "01-x.yaml").write_text(
        "id: x\ntitle: X\nscope: s\nmodles:\n  - model: openai/gpt-5\n"
        "budget: {max_stpes: 3, max_cost_usd: -1}\nsearch: {depht: basic}\n", encoding="utf-8")
    done = run_cli("check", env=child_env(), cwd=repo)
    assert done.code == 2 and "Traceback" not in done.stderr
    lines = done.stderr.splitlines()
    assert sorted(lines) == sorted([
        "error: topics/01-x.yaml: modles: unknown key (line 4, column 1); did you mean models?",  # not "missing"
        "error: topics/01-x.yaml: budget.max_stpes: unknown key (line 6, column 10); did you mean max_steps?",
        "error: topics/01-x.yaml: budget.max_cost_usd: Input should be greater than 0 (line 6, column 24)",
        "error: topics/01-x.yaml: search.depht: unknown key (line 7, column 10); did you mean depth?"]), lines
