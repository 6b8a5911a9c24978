"""`demo`: the whole refresh offline in a throwaway repository, checked against docs/ARCHITECTURE.md's
"What the demo promises"."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from research_dispatch.adopt.demo import MARKER, config_table, demo_command, prepare_directory
from research_dispatch.core.errors import BadInput
from tests.run.conftest import Output


def test_demo_refuses_to_delete_a_directory_it_did_not_make(tmp_path: Path) -> None:
    precious = tmp_path / "work"
    precious.mkdir()
    (precious / "thesis.tex").write_text("years of work")
    with pytest.raises(BadInput, match=r"refusing to delete .*not a previous demo"):
        demo_command(precious, echo=Output().append)
    assert (precious / "thesis.tex").read_text() == "years of work"
    origin = tmp_path / "demo.origin.git"
    origin.mkdir()
    (origin / "HEAD").write_text("ref: refs/heads/main\n")
    with pytest.raises(BadInput, match=r"demo\.origin\.git"):
        prepare_directory(tmp_path / "demo")
    assert (origin / "HEAD").exists()


def test_demo_directory_is_recreated_when_it_carries_the_marker(tmp_path: Path) -> None:
    directory, origin = prepare_directory(tmp_path / "demo")
    (directory / "leftover").write_text("x")
    again, _ = prepare_directory(tmp_path / "demo")
    assert again == directory and not (directory / "leftover").exists() and (directory / MARKER).exists()
    assert origin == tmp_path / "demo.origin.git"


def test_config_table_is_copied_with_its_subtables(tmp_path: Path) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[project]\nname = "x"\n\n[tool.research-dispatch]\njobs = 3\n\n'
                         '[tool.research-dispatch.pr]\nbase = "trunk"\n\n[tool.ruff]\nline-length = 1\n')
    assert config_table(pyproject) == ('[tool.research-dispatch]\njobs = 3\n\n'
                                       '[tool.research-dispatch.pr]\nbase = "trunk"\n')
    assert "framework_name" in config_table(tmp_path / "missing.toml")


@pytest.mark.slow
def test_demo_end_to_end(tmp_path: Path) -> None:
    out = Output()
    directory = tmp_path / "demo"
    code = demo_command(directory, echo=out.append)
    text = out.text
    assert code == 0, text
    assert "✗" not in text and text.count("✓") >= 12
    assert "pull request: #1" in text
    branch = subprocess.run(["git", "-C", str(tmp_path / "demo.origin.git"), "for-each-ref", "--format=%(refname)",
                             "refs/heads/"], capture_output=True, text=True, check=True).stdout.split()
    assert "refs/heads/main" in branch and any(b.startswith("refs/heads/research-refresh/") for b in branch)
    for secret in ("sk-or-demo", "tvly-demo", "ghs_demo"):
        assert secret not in text
    # A second demo recreates everything from scratch and passes again.
    out.clear()
    assert demo_command(directory, echo=out.append) == 0, out.text
