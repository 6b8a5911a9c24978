"""The one runner of work on threads under a deadline (`core/workers.py`), used by `run`'s legs and the
synthesis' calls: results in input order, a deadline that leaves blocked work behind, errors handed to the
caller, and the Ctrl-C path's cancel and running."""

from __future__ import annotations

import threading
import time

import pytest

from research_dispatch.core.workers import Workers


def test_results_come_in_input_order_and_each_finish_is_reported_in_the_callers_thread() -> None:
    caller = threading.current_thread()
    reported: list[tuple[int, bool]] = []
    runner = Workers([3, 1, 2], lambda n: n * 10, workers=2, name="t-", deadline=time.monotonic() + 60)
    assert runner.results(lambda n: reported.append((n, threading.current_thread() is caller))) == [30, 10, 20]
    assert reported == [(1, True), (2, True), (3, True)]


def test_the_deadline_leaves_blocked_work_behind_and_starts_nothing_after_it() -> None:
    release = threading.Event()
    started: list[str] = []

    def work(item: str) -> str:
        started.append(item)
        if item == "blocked":
            release.wait(30)
        return item

    try:
        runner = Workers(["blocked", "late"], work, workers=1, name="t-", deadline=time.monotonic() + 0.2)
        assert runner.results() == [None, None]  # the caller stops waiting at the deadline
        assert runner.running() == ["blocked"]
    finally:
        release.set()
    time.sleep(0.05)
    assert started == ["blocked"]  # the worker freed after the deadline takes no new item


def test_an_error_in_work_is_raised_in_the_caller() -> None:
    def work(item: int) -> int:
        if item == 2:
            raise ValueError("item 2 broke")
        return item

    with pytest.raises(ValueError, match="item 2 broke"):
        Workers([1, 2, 3], work, workers=1, name="t-", deadline=time.monotonic() + 60).results()


def test_queued_items_can_be_cancelled_while_running_ones_finish() -> None:
    release = threading.Event()
    runner = Workers(["a", "b", "c"], lambda item: release.wait(30), workers=1, name="t-")
    runner.start()
    while not runner.running():
        time.sleep(0.01)
    assert runner.cancel_queued() == ["b", "c"] and runner.running() == ["a"]
    assert not runner.wait(0.01)
    release.set()
    assert runner.wait(30)
    assert Workers([], str, workers=4, name="t-").wait(0)  # nothing to do is done
