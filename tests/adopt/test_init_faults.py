"""`init` refuses, with exit 2 and one line naming the path or the option, and writes nothing at all.

Each case runs the CLI (in process: tests/clirun.py) and compares the whole directory before and after.
These cases are rows of docs/RELIABILITY.md (scripts/dev/reliability_report.py collects this file).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.adopt.conftest import empty_repository, git_env, snapshot
from tests.clirun import CliRun, run_cli

reliability = pytest.mark.reliability
SHA = "a" * 40


def init(cwd: Path, *args: str) -> CliRun:
    return run_cli("init", *args, env=git_env(), cwd=cwd)


def refused(done: CliRun, *needles: str) -> None:
    assert done.code == 2, done.output
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in done.stderr, done.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


@reliability(area="input", case="init outside a git repository",
             expect="exit 2 'is not inside a git work tree; run `git init` first'; nothing created")
def test_outside_a_git_repository(tmp_path: Path) -> None:
    refused(init(tmp_path, "--ref", SHA), "not inside a git work tree")
    assert list(tmp_path.iterdir()) == []


@reliability(area="input", case="init in a subdirectory of a repository",
             expect="exit 2 naming the top level to run it at; nothing written anywhere")
def test_in_a_subdirectory(tmp_path: Path) -> None:
    repo = empty_repository(tmp_path / "review")
    (repo / "sub").mkdir()
    refused(init(repo / "sub", "--ref", SHA), "inside the git repository", str(repo.resolve()))
    assert snapshot(repo) == {} and list((repo / "sub").iterdir()) == []


@reliability(area="input", case="init in a bare repository", expect="exit 2; nothing written")
def test_in_a_bare_repository(tmp_path: Path) -> None:
    bare = tmp_path / "bare.git"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True, env=git_env())
    before = snapshot(bare)
    refused(init(bare, "--ref", SHA), "not inside a git work tree")
    assert snapshot(bare) == before


BROKEN_PYPROJECTS = {
    "invalid TOML": (b'[project]\nname = "x\n', "pyproject.toml: invalid TOML"),
    "text that is not UTF-8": (b'[project]\nname = "caf\xe9"\n', "pyproject.toml: is not UTF-8"),
    "an inline tool = {...} table, which a [tool.research-dispatch] header cannot extend": (
        b'tool = { ruff = { line-length = 99 } }\n', "cannot be added to this file"),
    "an invalid [tool.research-dispatch]": (b'[tool.research-dispatch]\njobs = "many"\n',
                                            "tool.research-dispatch.jobs"),
}


@reliability(area="input", case="init with a pyproject.toml that has {id}",
             expect="exit 2 naming pyproject.toml (and the field); the file and the repository unchanged")
@pytest.mark.parametrize("content", list(BROKEN_PYPROJECTS), ids=list(BROKEN_PYPROJECTS))
def test_a_pyproject_it_cannot_safely_extend(tmp_path: Path, content: str) -> None:
    repo = empty_repository(tmp_path / "review")
    data, needle = BROKEN_PYPROJECTS[content]
    (repo / "pyproject.toml").write_bytes(data)
    before = snapshot(repo)
    refused(init(repo, "--ref", SHA), needle)
    assert snapshot(repo) == before


@reliability(area="hostile", case="init where .github is a symlink out of the repository",
             expect="exit 2 'refusing path outside the repository'; nothing written inside or outside")
def test_a_symlinked_directory_cannot_steer_a_write_outside(tmp_path: Path) -> None:
    repo = empty_repository(tmp_path / "review")
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, repo / ".github")
    refused(init(repo, "--ref", SHA), "refusing path outside the repository")
    assert list(outside.iterdir()) == []
    assert sorted(p.name for p in repo.iterdir()) == [".git", ".github"]


@reliability(area="input", case="init where a directory it needs is a file",
             expect="exit 2 naming the path; nothing written")
def test_a_file_where_a_directory_must_be(tmp_path: Path) -> None:
    repo = empty_repository(tmp_path / "review")
    (repo / "docs").write_text("not a directory\n", encoding="utf-8")
    before = snapshot(repo)
    refused(init(repo, "--ref", SHA), "docs")
    assert snapshot(repo) == before


BAD_OPTIONS = {
    "an abbreviated commit": (["--ref", "3d3c42e"], "--ref: '3d3c42e' looks like an abbreviated commit"),
    "a ref with shell and YAML syntax": (["--ref", "v1 # ${{ secrets.X }}"], "--ref:"),
    "a ref climbing out": (["--ref", "../../main"], "--ref:"),
    "a ref with a newline": (["--ref", "v1\nrun: x"], "--ref:"),
    "an upstream that is not owner/name": (["--ref", SHA, "--upstream", "evil/x/.github"], "--upstream:"),
}


@reliability(area="input", case="init with {id}", expect="exit 2 naming the option; nothing written")
@pytest.mark.parametrize("option", list(BAD_OPTIONS), ids=list(BAD_OPTIONS))
def test_a_bad_pin_is_refused_before_anything_is_written(tmp_path: Path, option: str) -> None:
    repo = empty_repository(tmp_path / "review")
    args, needle = BAD_OPTIONS[option]
    refused(init(repo, *args), needle)
    assert snapshot(repo) == {}


@reliability(area="input", case="init --force where a generated file's path is a directory",
             expect="exit 2 naming the path; nothing written")
def test_force_never_replaces_a_directory(tmp_path: Path) -> None:
    repo = empty_repository(tmp_path / "review")
    (repo / ".github/workflows/research-refresh.yml").mkdir(parents=True)
    (repo / ".github/workflows/research-refresh.yml/keep").write_text("x", encoding="utf-8")
    before = snapshot(repo)
    refused(init(repo, "--ref", SHA, "--force"), ".github/workflows/research-refresh.yml")
    assert snapshot(repo) == before
