"""Files keep the mode the umask gives, and a tracked file keeps its mode (issue 11, build 5).

Before: `fsio.write_atomic` created its temp file with `mkstemp` (mode 0600) and renamed it into place,
so every report, call log and synthesis file ended up 0600 whatever the umask, and rewriting a tracked
file changed its mode in git (a spurious mode change in the PR diff).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from research_dispatch.core.fsio import write_atomic
from tests.bounds.conftest import child_env, fake_env, make_repo
from tests.clirun import CliRun, run_cli

reliability = pytest.mark.reliability


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@contextmanager
def umask(value: int) -> Iterator[None]:
    previous = os.umask(value)
    try:
        yield
    finally:
        os.umask(previous)


def _research(repo: Path, env: dict[str, str], mask: int) -> CliRun:
    with umask(mask):
        return run_cli("research", "diloco-family", "--repo", str(repo), env=env)


@reliability(area="bounds", case="files written by `research` under umask 022, then a report whose mode was "
                                  "changed to 0664 is rewritten",
             expect="report, call log, status and trace are 0644; the rewritten report stays 0664")
def test_written_files_follow_the_umask_and_keep_an_existing_mode(tmp_path: Path, gateway: Any,
                                                                  tavily: Any) -> None:
    repo = make_repo(tmp_path, ("02-",))
    env = child_env(fake_env(gateway, tavily))
    first = _research(repo, env, 0o022)
    assert first.code == 0, first.output
    report = repo / "research" / "02-diloco-family.md"
    written = [report, repo / "research" / "02-diloco-family.calls.jsonl",
               repo / "build" / "legs" / "02-diloco-family.json", repo / "build" / "traces" / "02-diloco-family.jsonl"]
    assert {p.name: oct(mode(p)) for p in written} == {p.name: "0o644" for p in written}
    before = report.read_bytes()
    report.chmod(0o664)
    second = _research(repo, env, 0o022)
    assert second.code == 0, second.output
    assert report.read_bytes() != before  # really rewritten (new timestamps)
    assert oct(mode(report)) == "0o664"


def test_write_atomic_modes_in_process(tmp_path: Path) -> None:
    with umask(0o077):
        assert mode(write_atomic(tmp_path / "private.txt", "x")) == 0o600
    with umask(0o022):
        assert mode(write_atomic(tmp_path / "shared.txt", "x")) == 0o644
        script = tmp_path / "tool.sh"
        script.write_text("#!/bin/sh\n")
        script.chmod(0o755)
        write_atomic(script, "#!/bin/sh\necho hi\n")
        assert mode(script) == 0o755 and script.read_text() == "#!/bin/sh\necho hi\n"
        assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []
