"""One rule for branch names (`core/gitref.py`): git's own, checked wherever a name enters — the cycle,
`pr.branch_prefix` and `pr.base` (so `check` refuses them), `publish --branch/--base`, `init`'s pins."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

# `check` loads its stage lazily; imported here, while collecting, so that the tests below measure the rule and
# not the first import of the client libraries (the fast tier's CPU guard, tests/tierguard.py)
import research_dispatch.run.documents  # noqa: F401
from research_dispatch.core import gitref
from tests.clirun import run_cli
from tests.profiles import examples

PIECES = ["a", "Z", "0", ".", "/", "-", "_", "..", ".lock", "@{", "@", "//", " ", "~", "^", ":", "*", "[", "\\"]


@settings(max_examples=examples(60))
@given(st.lists(st.sampled_from(PIECES), min_size=1, max_size=6).map("".join))
@example("abc.")
@example("a.lock")
@example("a/.b/c")
@example("x/")
@example("@")
def test_the_rule_without_git_says_what_git_says(name: str) -> None:
    """The stand-in for a machine without git, against git itself (the independent implementation)."""
    git = subprocess.run(["git", "check-ref-format", f"refs/heads/{name}"], capture_output=True, check=False)
    assert gitref._documented_rules(name) == (git.returncode == 0)
    if gitref.valid_branch_name(name):  # the product's rule: git's, in fewer characters
        assert git.returncode == 0


@pytest.mark.parametrize("name", ["abc.", "a.lock", "a/.b", "-x", "a b", "a\"b", "x" * 201, "ü"])
def test_names_git_refuses_or_the_product_cannot_write_unquoted_are_refused(name: str) -> None:
    assert not gitref.valid_branch_name(name)


@pytest.mark.parametrize(("table", "field", "shown"), [
    ('branch_prefix = "refresh.lock/"', "tool.research-dispatch.pr.branch_prefix", "refresh.lock/"),
    ('branch_prefix = "refresh/.hidden/"', "tool.research-dispatch.pr.branch_prefix", "refresh/.hidden/"),
    ('base = "main."', "tool.research-dispatch.pr.base", "main."),
], ids=["a .lock component", "a hidden component", "a base ending in a dot"])
def test_check_refuses_a_branch_setting_git_refuses(repo: Path, table: str, field: str, shown: str) -> None:
    """`check` used to take a branch prefix git refuses (issue 31): the refresh branch then failed at publish."""
    pyproject = repo / "pyproject.toml"
    pyproject.write_text(pyproject.read_text(encoding="utf-8") + f"pr = {{{table}}}\n", encoding="utf-8")
    done = run_cli("check", "--repo", str(repo))
    assert done.code == 2, done.output
    [line] = done.stderr.strip().splitlines()
    assert "pyproject.toml" in line and field in line and shown in line and "git check-ref-format" in line


@pytest.mark.parametrize("cycle", ["abc.", "a.lock", "a..b"])
def test_a_cycle_git_refuses_as_a_branch_is_bad_input(repo: Path, cycle: str) -> None:
    done = run_cli("plan", "--repo", str(repo), "--cycle", cycle)
    assert done.code == 2 and "--cycle" in done.stderr and repr(cycle) in done.stderr
