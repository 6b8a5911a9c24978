"""The fake gateway's report banner and the product's reading of it (issue 30.8): the fakes import nothing
of the product, so this test holds the two together — a run pointed at the fakes by hand must say, in its
synthesis and PR body too, that its output is canned."""

from __future__ import annotations

from pathlib import Path

from research_dispatch.core.notice import (
    CANNED_MARK,
    MARKER,
    canned_notice,
    canned_reports,
    is_canned,
    repository_notice,
    write_marker,
)
from research_dispatch_fakes.script_researcher import CANNED_BANNER, banner


def test_the_fake_gateways_banner_is_what_the_product_looks_for() -> None:
    assert CANNED_BANNER.startswith(CANNED_MARK)
    assert banner("not-in-the-corpus").startswith(CANNED_MARK)


def _report(directory: Path, stem: str, body: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{stem}.md").write_text(f"---\nmodel: x/y\n---\n# Title\n\n{body}\n", encoding="utf-8")


def test_canned_reports_give_the_repository_a_notice_and_real_ones_none(tmp_path: Path) -> None:
    research = tmp_path / "research"
    _report(research, "02-real", "A report a real model wrote, quoting “> **Demo output” mid-line.")
    assert repository_notice(tmp_path, "research") is None
    _report(research, "01-canned", CANNED_BANNER)
    assert canned_reports(research) == ["01-canned"]
    notice = repository_notice(tmp_path, "research")
    assert notice is not None and notice.startswith("Demo output, not research: 1 report here (01-canned)")
    assert canned_notice([]) is None and is_canned(CANNED_BANNER) and not is_canned("# Title\n\nText.")
    write_marker(tmp_path, "the demo's own notice")  # a demo repository keeps the demo's words
    assert (tmp_path / MARKER).exists() and repository_notice(tmp_path, "research") == "the demo's own notice"
