"""The command surface as a user first meets it: `--help` of every command, `--version`, usage errors.

Each command's help must show the FIXED flags of docs/ARCHITECTURE.md (§ CLI) (checks outside the repository call them),
exit 0 and print nothing on stderr; a usage error is exit 2 with click's `Error:` line and no traceback.
Help and version are rules of the command (in process, tests/clirun.py); the usage errors are what the
real entry point exits with and prints — nothing else on stderr (no warning at import) — so they run the
installed console script in a fresh interpreter.
"""

from __future__ import annotations

import re

import pytest

from research_dispatch import __version__
from tests.bounds.conftest import child_env, run_process
from tests.clirun import run_cli

# docs/ARCHITECTURE.md § CLI — FIXED: the flags (and argument) each command documents; every command takes --repo.
FIXED_FLAGS: dict[str, tuple[str, ...]] = {
    "check": ("--repo",),
    "plan": ("--repo", "--topics", "--models", "--github-output"),
    "research": ("--repo", "TOPIC", "--model"),
    "verify": ("--repo", "REPORTS", "--online", "--github-summary"),
    "synthesize": ("--repo",),
    "publish": ("--repo", "--branch", "--base", "--no-push", "--no-pr", "--dry-run"),
    "collect": ("--repo", "INCOMING"),
    "run": ("--repo", "--topics", "--jobs", "--publish / --no-publish"),
    "demo": ("--repo", "--dir"),
    "init": ("--repo",),
}


@pytest.mark.parametrize("command", sorted(FIXED_FLAGS))
def test_help_of_each_command_shows_its_fixed_flags(command: str) -> None:
    done = run_cli(command, "--help", env=child_env())
    assert done.code == 0 and done.stderr == "", done.output
    assert done.stdout.startswith(f"Usage: research-dispatch {command} [OPTIONS]"), done.stdout
    for flag in FIXED_FLAGS[command]:
        assert flag in done.stdout, (command, flag)


def test_top_level_help_lists_every_command() -> None:
    done = run_cli("-h", env=child_env())
    assert done.code == 0 and done.stderr == "", done.output
    listed = done.stdout.split("Commands:", 1)[1].split()
    assert set(FIXED_FLAGS) <= set(listed), listed


def test_top_level_help_is_in_workflow_order_with_ci_steps_last() -> None:
    """Issue 30.8: a lead reads the commands in the order they use them; the CI steps (`collect` among them)
    come after, under their own heading, not alphabetically beside `init`."""
    done = run_cli("--help", env=child_env())
    people, steps = done.stdout.split("Commands:", 1)[1].split("CI steps", 1)
    names = [line.split()[0] for line in people.splitlines() if line.startswith("  ")]
    assert names == ["init", "demo", "check", "plan", "run", "verify"], done.stdout
    ci = [line.split()[0] for line in steps.splitlines() if line.startswith("  ")]
    assert ci == ["notify", "research", "collect", "synthesize", "publish"], done.stdout  # job order


def test_version() -> None:
    done = run_cli("--version", env=child_env())
    assert (done.code, done.stderr) == (0, ""), done.output
    # this checkout runs editable: the commit is its HEAD (a built wheel says `(commit <sha>)`, test_installed)
    assert re.fullmatch(rf"research-dispatch {re.escape(__version__)} \(git checkout at [0-9a-f]{{40}}\)\n",
                        done.stdout), done.stdout


@pytest.mark.parametrize("argv,message", [
    (["frobnicate"], "Error: No such command 'frobnicate'."),
    (["plan", "--frobnicate"], "Error: No such option '--frobnicate'"),
    (["research"], "Error: Missing argument 'TOPIC'."),
    (["run", "--jobs", "0"], "Error: Invalid value for '--jobs'"),
], ids=["unknown-command", "unknown-option", "missing-argument", "jobs-out-of-range"])
def test_usage_errors_are_exit_2_without_a_traceback(argv: list[str], message: str) -> None:
    """click's usage format (a usage line, a hint, then the error), never a traceback, nothing on stdout."""
    done = run_process(*argv, env=child_env(), timeout=60)
    assert done.code == 2 and done.stdout == "", done.output
    assert message in done.stderr.splitlines()[-1], done.stderr
    assert "Traceback" not in done.stderr
