"""The one runner of work on threads under a deadline: `run`'s legs and the synthesis' calls.

Items are taken from one shared queue by at most `workers` daemon threads. No item starts once the
deadline has passed. The caller either collects the results in its own thread (`results`: in input
order, each finished item reported as it finishes, an exception in `work` re-raised there, an item not
finished by the deadline None) or watches the run (`wait`, `running`, `cancel_queued`: the Ctrl-C path
of `run/pool.py`).

Why daemon threads, and not `concurrent.futures.ThreadPoolExecutor`: its workers are joined when the
pool closes and again at interpreter exit, so one item blocked in a 40-second socket read would hold
Ctrl-C — or the end of a synthesis past its time limit — for 40 seconds. Daemon threads are never
joined: the caller takes what finished, records what did not, and leaves the blocked reads behind
(the bounds of every call, `core/bounds.py`, end them soon after). `work` must therefore not share
mutable state with the caller that a late finish could corrupt: a late result is simply dropped.
"""

from __future__ import annotations

import collections
import queue
import threading
import time
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class Workers(Generic[T, R]):
    """`work` over `items` on up to `workers` daemon threads named `<name><n>`, until `deadline` (a
    `time.monotonic()` value; None: no deadline)."""

    def __init__(self, items: Sequence[T], work: Callable[[T], R], *, workers: int, name: str,
                 deadline: float | None = None) -> None:
        self._items = list(items)
        self._work = work
        self._workers = max(1, workers)
        self._name = name
        self._deadline = deadline
        self._lock = threading.Lock()
        self._queue = collections.deque(range(len(self._items)))
        self._running: dict[int, T] = {}
        self._unfinished = len(self._items)
        self._done = threading.Event()
        self._finished: queue.Queue[tuple[int, R | None, BaseException | None]] = queue.Queue()
        if not self._items:
            self._done.set()

    def start(self) -> None:
        for number in range(min(self._workers, len(self._items))):
            threading.Thread(target=self._worker, name=f"{self._name}{number}", daemon=True).start()

    def _worker(self) -> None:
        while self._deadline is None or time.monotonic() < self._deadline:
            with self._lock:
                if not self._queue:
                    return
                index = self._queue.popleft()
                self._running[index] = self._items[index]
            value: R | None = None
            error: BaseException | None = None
            try:
                value = self._work(self._items[index])
            except BaseException as exc:  # handed to the caller's thread (`results`), which re-raises it
                error = exc
            with self._lock:
                self._running.pop(index, None)
                self._count_finished(1)
            self._finished.put((index, value, error))

    def _count_finished(self, count: int) -> None:
        self._unfinished -= count
        if self._unfinished <= 0:
            self._done.set()

    def results(self, on_done: Callable[[int], None] | None = None) -> list[R | None]:
        """Start the workers and collect every result in input order, in the caller's thread, until all
        have finished or the deadline passes (an unfinished item is None). `on_done(n)` is called after
        the n-th item finished; an exception raised by `work` is re-raised here."""
        results: list[R | None] = [None] * len(self._items)
        self.start()
        for finished_count in range(1, len(self._items) + 1):
            timeout = None if self._deadline is None else max(0.001, self._deadline - time.monotonic())
            try:
                index, value, error = self._finished.get(timeout=timeout)
            except queue.Empty:
                break
            if error is not None:
                raise error
            results[index] = value
            if on_done is not None:
                on_done(finished_count)
        return results

    def wait(self, timeout: float | None) -> bool:
        """True once every item has finished or been cancelled."""
        return self._done.wait(timeout)

    def cancel_queued(self) -> list[T]:
        """Take every item that has not started off the queue; they will not start."""
        with self._lock:
            cancelled = [self._items[index] for index in self._queue]
            self._queue.clear()
            self._count_finished(len(cancelled))
        return cancelled

    def running(self) -> list[T]:
        with self._lock:
            return list(self._running.values())
