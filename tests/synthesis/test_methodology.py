"""The dispatch table of docs/METHODOLOGY.md is regenerated between its markers; the prose is untouched."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from research_dispatch.synthesis.write.methodology import END, START, MarkersMissing, replace_table
from tests.conftest import ROOT
from tests.synthesis.conftest import write_report


def test_replace_table_keeps_everything_outside_the_markers() -> None:
    document = f"# Title\n\nProse before.\n\n{START}\n| old |\n|---|\n{END}\n\nProse after.\n"
    updated = replace_table(document, "| new |\n|---|")
    assert updated == f"# Title\n\nProse before.\n\n{START}\n| new |\n|---|\n{END}\n\nProse after.\n"
    crlf = document.replace("\n", "\r\n")
    assert replace_table(crlf, "| new |") == f"# Title\r\n\r\nProse before.\r\n\r\n{START}\r\n| new |\r\n{END}" \
                                             "\r\n\r\nProse after.\r\n"
    with pytest.raises(MarkersMissing):
        replace_table("no markers here\n", "| t |")
    with pytest.raises(MarkersMissing):
        replace_table(f"{END}\n{START}\n", "| t |")


def test_the_repository_methodology_gets_its_table_and_keeps_its_prose(repo: Path, run_synthesis) -> None:
    (repo / "docs").mkdir()
    shutil.copy(ROOT / "docs" / "METHODOLOGY.md", repo / "docs" / "METHODOLOGY.md")
    original = (repo / "docs" / "METHODOLOGY.md").read_bytes()
    write_report(repo, "02-diloco-family", "deepseek/deepseek-v4-pro", ["DiLoCo trains with infrequent "
                 "synchronisation across islands of compute"])
    result = run_synthesis(repo)
    updated = (repo / "docs" / "METHODOLOGY.md").read_bytes()
    assert result.methodology_path == repo / "docs" / "METHODOLOGY.md"
    head, _, rest = original.partition(START.encode())
    new_head, _, new_rest = updated.partition(START.encode())
    assert new_head == head
    assert new_rest.partition(END.encode())[2] == rest.partition(END.encode())[2]
    table = new_rest.partition(END.encode())[0].decode()
    assert "| File | Author model | Served model | Route | Rationale |" in table
    assert ("| research/02-diloco-family.md | deepseek/deepseek-v4-pro | deepseek/deepseek-v4-pro | exact | "
            "Strong on distributed-systems and pretraining literature |") in table
    assert ("| research/01-composer-2.5.md | google/gemini-3.1-pro-preview | — | not yet run | "
            "Long-context grounded research is Gemini's strong suit |") in table
    assert table.count("\n| research/") == 5
    # the four legs without reports are limitations of the synthesis, not silent gaps
    data = result.ledger
    assert {leg["stem"]: leg["state"] for leg in data["legs"]}["01-composer-2.5"] == "missing"
    assert sum("has no report" in item for item in data["limitations"]) == 4


def test_without_markers_the_file_is_left_alone_with_a_warning(planted: Path, run_synthesis) -> None:
    path = planted / "docs" / "METHODOLOGY.md"
    path.parent.mkdir()
    path.write_text("# Methodology\n\nNo table markers here.\n", encoding="utf-8")
    before = path.read_bytes()
    result = run_synthesis(planted)
    assert path.read_bytes() == before and result.methodology_path is None
    assert any("dispatch table not updated" in w for w in result.warnings)


def test_a_missing_methodology_file_is_not_created(planted: Path, run_synthesis) -> None:
    result = run_synthesis(planted)
    assert result.methodology_path is None and not (planted / "docs").exists()
