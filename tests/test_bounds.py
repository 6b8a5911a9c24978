"""`bounds.guard_chunks`: deadline, size cap and interrupt hold however the body arrives."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from research_dispatch.core.bounds import CallBounds, guard_chunks
from research_dispatch.core.errors import CallTimedOut, Interrupted, ResponseTooLarge


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def dribble(clock: FakeClock, step: float) -> Iterator[bytes]:
    while True:  # a slow-loris body: one byte per `step` seconds, for ever
        clock.now += step
        yield b"x"


def test_slow_body_stops_at_the_deadline_not_per_read() -> None:
    clock = FakeClock()
    bounds = CallBounds.within(2.0, clock=clock)
    received = 0
    with pytest.raises(CallTimedOut):
        for chunk in guard_chunks(dribble(clock, 0.3), bounds, "model call"):
            received += len(chunk)
    assert received == 6  # 6 × 0.3 s < 2 s; the 7th byte arrives after the deadline


def test_endless_body_stops_at_the_size_cap() -> None:
    def endless() -> Iterator[bytes]:
        while True:
            yield b"y" * 65536

    bounds = CallBounds.within(60.0, max_bytes=1_000_000)
    total = 0
    with pytest.raises(ResponseTooLarge):
        for chunk in guard_chunks(endless(), bounds, "search"):
            total += len(chunk)
    assert total <= 1_000_000


def test_interrupt_stops_the_next_chunk_and_leg_deadline_caps_the_call() -> None:
    clock = FakeClock()
    stop = threading.Event()
    bounds = CallBounds.within(600.0, leg_deadline=clock() + 5.0, interrupt=stop, clock=clock)
    assert bounds.remaining() == pytest.approx(5.0)
    assert bounds.read_timeout(180.0) == pytest.approx(5.0)
    stop.set()
    with pytest.raises(Interrupted):
        list(guard_chunks([b"a", b"b"], bounds, "extract"))
