"""The skip guard: a test session fails when a test is skipped that `tests/skips-allowed.txt` does not list.

Why: a skip is silent. An import error turned into a skip by `importorskip`, a tool that disappeared
from the machine, a `skipif` whose condition drifted — each keeps CI green while the tests stop
running (issue 16). So every skip must be named, with its reason, in a checked-in allow-list; a new one
fails the session, and the number of skips can only grow by editing that list in review.

What counts as a skip: any test report or collection report with the outcome "skipped" — `pytest.skip`,
`skip`/`skipif` marks, a module-level skip or `importorskip`, and `xfail` (an expected failure hides a
failure just as well). Entries are exact node ids (`path::test[param]`; a module-level skip is the
module's path), one a line, `#` starts a comment.

Under pytest-xdist the guard runs in the controller only: workers forward every test report (and every
skipped collection report) to it, so the same rule holds with `-n 2 --dist loadfile`. The session's exit
status becomes 1 (tests failed) when it would otherwise have been 0, and the terminal summary lists each
unlisted skip with its reason. `--skip-allowlist FILE` reads another list (the guard's own tests use it).
"""

from __future__ import annotations

from pathlib import Path

import pytest

ALLOWLIST = Path(__file__).resolve().with_name("skips-allowed.txt")


def read_allowlist(path: Path) -> set[str]:
    """The node ids a file allows to skip (blank lines and `#` comments ignored)."""
    entries = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        entry = line.split("#", 1)[0].strip()
        if entry:
            entries.add(entry)
    return entries


def skip_reason(report: pytest.TestReport | pytest.CollectReport) -> str:
    """The reason of a skipped report: the skip message, or `xfail: <reason>`."""
    wasxfail = getattr(report, "wasxfail", None)
    if wasxfail is not None:
        return f"xfail: {wasxfail}" if wasxfail else "xfail"
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


class SkipGuard:
    """Collects the session's skips (in the controller under xdist) and fails the session on unlisted ones."""

    def __init__(self, allowlist: Path) -> None:
        self.allowlist = allowlist
        self.allowed = read_allowlist(allowlist) if allowlist.exists() else set()
        self.skipped: dict[str, str] = {}

    @property
    def unlisted(self) -> dict[str, str]:
        return {nodeid: reason for nodeid, reason in sorted(self.skipped.items()) if nodeid not in self.allowed}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.skipped:
            self.skipped.setdefault(report.nodeid, skip_reason(report))

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.skipped:
            self.skipped.setdefault(report.nodeid, skip_reason(report))

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.unlisted and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        unlisted = self.unlisted
        if not unlisted:
            return
        terminalreporter.section("skip guard", sep="=", red=True, bold=True)
        terminalreporter.line(f"{len(unlisted)} skipped test(s) not listed in {self.allowlist} — a skip must be "
                              "justified there, or the test must run:", red=True)
        for nodeid, reason in unlisted.items():
            terminalreporter.line(f"  {nodeid}: {reason}", red=True)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("skip guard").addoption(
        "--skip-allowlist", default=str(ALLOWLIST), metavar="FILE",
        help="The node ids allowed to skip (default: tests/skips-allowed.txt); any other skip fails the session.")


def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):  # an xdist worker: its reports reach the controller's guard
        return
    config.pluginmanager.register(SkipGuard(Path(config.getoption("skip_allowlist"))), "skip-guard")
