"""The tier guard: an unmarked test that takes more than a second fails, so the fast tier stays fast by itself.

Why: `make test` runs only the fast tier (`-m "not slow and not e2e"`, docs/ARCHITECTURE.md "Test tiers" —
FIXED marker names). A test that starts the CLI as a process, a real server or a build belongs to `slow`;
a workflow-emulator run, or anything of 20 s and more, to `e2e`. A forgotten marker would quietly make
the contributor's loop slower with every such test, so the guard makes it a failure that names the test.

What "takes" means, so that the guard never depends on how busy the machine is: the CPU time of the
test's setup and call (a module or session fixture's setup counts for the first test that uses it) — this
process (every thread: the in-process fake servers run in threads) plus the children it waited for —
must stay within `CPU_LIMIT_S`; and, for a test that mostly waits (a sleep, a timeout it provokes), its
wall time within `WALL_LIMIT_S` times the machine's load per core when that is above one (`wall_limit`):
on a machine shared by many processes a fast test waits its turn for a core, and at a load of 20 on two
cores a fixed 3 s bound failed 25 fast tests that pass alone. A test marked `slow` or `e2e` is not measured.

The guard is off under the `thorough` hypothesis profile (many examples by design) and with
`RD_TIER_GUARD=off` (a debugger, coverage). A failing test keeps its own failure; the guard reports only
tests that passed.
"""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Generator

import pytest

CPU_LIMIT_S = 1.0
WALL_LIMIT_S = 3.0
TIER_MARKERS = ("slow", "e2e")
STASH = pytest.StashKey[dict[str, float]]()


def _cpu_now() -> float:
    """CPU seconds of this process (all threads) and of the children it has waited for."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def enabled() -> bool:
    return os.environ.get("RD_TIER_GUARD", "on") != "off" and os.environ.get("HYPOTHESIS_PROFILE") != "thorough"


def wall_limit() -> float:
    """`WALL_LIMIT_S`, stretched by the load per core when the machine is busier than it has cores."""
    try:
        load = os.getloadavg()[0] / (os.cpu_count() or 1)
    except OSError:  # no load average on this platform
        load = 1.0
    return WALL_LIMIT_S * max(1.0, load)


def verdict(cpu_s: float, wall_s: float, wall_allowed: float = WALL_LIMIT_S) -> str | None:
    """Why a test of these costs is not a fast-tier test, or None when it is."""
    if cpu_s > CPU_LIMIT_S:
        return f"used {cpu_s:.2f} s of CPU (the fast tier allows {CPU_LIMIT_S:.0f} s)"
    if wall_s > wall_allowed:
        return f"took {wall_s:.2f} s of wall time (the fast tier allows {wall_allowed:.1f} s at this load)"
    return None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, object, object]:
    if not enabled() or any(item.get_closest_marker(name) for name in TIER_MARKERS):
        return (yield)
    item.stash[STASH] = {"cpu": _cpu_now(), "wall": time.monotonic()}
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, pytest.TestReport,
                                                                                           pytest.TestReport]:
    """A passed call whose setup and call together went over a limit becomes a failure of the call."""
    report = yield
    start = item.stash.get(STASH, None)
    if start is None or call.when != "call" or not report.passed:
        return report
    why = verdict(_cpu_now() - start["cpu"], time.monotonic() - start["wall"], wall_limit())
    if why is not None:
        report.outcome = "failed"
        report.longrepr = (f"tier guard: {item.nodeid} {why}. Mark it @pytest.mark.slow (a subprocess, a real "
                           "server, a build, anything over a second) or @pytest.mark.e2e (a workflow-emulator "
                           "run, anything over 20 s), or make it faster (tests/tierguard.py).")
    return report
