"""The tier guard's bounds (tests/tierguard.py): CPU judges the work; the wall bound widens with the load."""

from __future__ import annotations

from tests.tierguard import CPU_LIMIT_S, WALL_LIMIT_S, verdict, wall_limit_s


def test_cpu_over_the_limit_is_slow_whatever_the_wall_time() -> None:
    assert verdict(CPU_LIMIT_S + 0.01, 0.1) == "used 1.01 s of CPU (the fast tier allows 1 s)"
    assert verdict(CPU_LIMIT_S, WALL_LIMIT_S) is None


def test_the_wall_bound_widens_with_the_runnable_threads_per_core() -> None:
    assert wall_limit_s(load=0.4, cpus=2) == WALL_LIMIT_S  # an idle machine: the bound as written
    assert wall_limit_s(load=2.0, cpus=2) == WALL_LIMIT_S
    assert wall_limit_s(load=18.0, cpus=2) == 9 * WALL_LIMIT_S  # nine runnable threads per core
    assert verdict(0.5, 5.0, wall_limit_s(load=18.0, cpus=2)) is None
    assert verdict(0.5, 5.0, wall_limit_s(load=1.0, cpus=2)) == \
        "took 5.00 s of wall time (the fast tier allows 3 s at this load)"
