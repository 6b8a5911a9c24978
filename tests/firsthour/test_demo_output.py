"""`demo` as a newcomer meets it (issue 24): a short summary that fits the terminal, honest banners on
everything the fakes made, the whole run in a log file, and Ctrl-C that removes the half-built demo.

Every command runs as a user types it, from a scratch working directory (in process: tests/clirun.py);
Ctrl-C goes to a fresh interpreter, as a terminal sends it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from research_dispatch.adopt.demo import _removed_if_interrupted
from research_dispatch.core.errors import Interrupted
from tests.adopt.conftest import empty_repository
from tests.bounds.conftest import Child, child_env, command
from tests.clirun import run_cli

pytestmark = pytest.mark.slow

BANNER = "Demo output, not research"


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def test_demo_prints_a_short_summary_that_fits_and_logs_the_whole_run(tmp_path: Path) -> None:
    done = run_cli("demo", "--dir", "demo", env=child_env({"COLUMNS": "80"}), cwd=tmp_path)
    assert done.code == 0, done.output
    lines = done.stdout.splitlines()
    assert len(lines) <= 40, done.stdout
    assert max(len(line) for line in lines) <= 100, [line for line in lines if len(line) > 100]
    assert re.search(r"demo ok: (\d+)/\1 checks passed", done.stdout)
    assert "fail" not in done.stdout.lower() and "error" not in done.stdout.lower()  # what the stop hook greps
    assert "step 1/40" not in done.stdout  # the run's narration is in the log, not on the terminal
    log = (tmp_path / "demo" / "build" / "demo.log").read_text(encoding="utf-8")
    assert "step 1/40" in log and re.search(r"demo ok: (\d+)/\1", log)
    # The two counts of the synthesis are each named for what they count.
    assert "findings in the ledger:" in done.stdout and "decision table (recommendations only):" in done.stdout
    # Everything the fakes made says so.
    demo = tmp_path / "demo"
    reports = sorted((demo / "research").glob("*.md"))
    assert len(reports) == 5 and all(BANNER in p.read_text(encoding="utf-8") for p in reports)
    assert BANNER in (demo / "framework" / "composer-replication-framework.md").read_text(encoding="utf-8")
    assert BANNER in (demo / "build" / "pr-body.md").read_text(encoding="utf-8")
    assert "not about your topics" not in (demo / "build" / "pr-body.md").read_text(encoding="utf-8")


def test_demo_verbose_prints_the_whole_run(tmp_path: Path) -> None:
    done = run_cli("demo", "--dir", "demo", "-v", env=child_env(), cwd=tmp_path)
    assert done.code == 0, done.output
    assert "step 1/40" in done.stdout and "PR body, first 40 lines:" in done.stdout


def test_demo_on_an_adopters_repository_says_it_is_not_about_their_topics_and_keeps_legs_apart(
        tmp_path: Path) -> None:
    repo = empty_repository(tmp_path / "review")
    assert run_cli("init", env=child_env(), cwd=repo).code == 0
    done = run_cli("demo", "--repo", ".", env=child_env({"COLUMNS": "80"}), cwd=repo)
    assert done.code == 0, done.output
    lines = done.stdout.splitlines()
    assert max(len(line) for line in lines) <= 100, [line for line in lines if len(line) > 100]
    # The example topic's two legs stay distinct at 80 columns.
    assert "01-example.openai-gpt-5" in done.stdout and "01-example.anthropic-claude-sonnet-4.6" in done.stdout
    demo = repo / "build" / "demo"
    for report in sorted((demo / "research").glob("*.md")):
        text = report.read_text(encoding="utf-8")
        assert BANNER in text and "not about the topic named above" in text
    body = (demo / "build" / "pr-body.md").read_text(encoding="utf-8")
    assert "not about your topics" in body
    synthesis = next((demo / "framework").glob("*.md")).read_text(encoding="utf-8")
    assert "not about your topics" in synthesis


def test_ctrl_c_in_demo_removes_the_half_built_demo_and_says_so(tmp_path: Path) -> None:
    child = Child(command("demo", "--dir", "demo", "-v"), child_env(), cwd=tmp_path)
    try:
        child.wait_for_line("started (", timeout=300)
        child.interrupt()
        done = child.finish(timeout=60)
    finally:
        child.kill()
    assert done.code == 1, done.output
    assert "removed the half-built demo demo and demo.origin.git" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "demo").exists() and not (tmp_path / "demo.origin.git").exists()


def test_the_ctrl_c_hint_keeps_the_repo_the_user_gave(tmp_path: Path) -> None:
    """After Ctrl-C in `demo --repo .`, the command that rebuilds the demo is that one, not `demo` alone."""
    directory, origin = tmp_path / "demo", tmp_path / "demo.origin.git"
    directory.mkdir()
    origin.mkdir()
    with pytest.raises(Interrupted) as caught, \
            _removed_if_interrupted(directory, origin, "research-dispatch demo --repo 'my review'"):
        raise KeyboardInterrupt
    assert "run `research-dispatch demo --repo 'my review'` again to rebuild it" in str(caught.value)
    assert not directory.exists() and not origin.exists()
