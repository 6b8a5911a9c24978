"""The tier guard's bounds (tests/tierguard.py): CPU judges the work; the wall bound stretches with the load."""

from __future__ import annotations

import pytest

from tests import tierguard
from tests.tierguard import CPU_LIMIT_S, WALL_LIMIT_S, verdict, wall_limit


def test_cpu_over_the_limit_is_slow_whatever_the_wall_time() -> None:
    assert verdict(CPU_LIMIT_S + 0.01, 0.1) == "used 1.01 s of CPU (the fast tier allows 1 s)"
    assert verdict(CPU_LIMIT_S, WALL_LIMIT_S) is None


@pytest.mark.parametrize(("load", "allowed"), [(0.4, WALL_LIMIT_S), (2.0, WALL_LIMIT_S), (18.0, 9 * WALL_LIMIT_S)])
def test_the_wall_bound_stretches_with_the_load_per_core(load: float, allowed: float,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tierguard.os, "getloadavg", lambda: (load, load, load))
    monkeypatch.setattr(tierguard.os, "cpu_count", lambda: 2)
    assert wall_limit() == allowed
    assert (verdict(0.5, 5.0, wall_limit()) is None) == (allowed > 5.0)
