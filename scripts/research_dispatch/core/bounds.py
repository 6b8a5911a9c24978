"""Wall-clock, size and interrupt bounds for one outbound call (model, search, extract, MCP).

Why this exists: an HTTP client's `timeout` is per read, so a server that dribbles a byte every few
hundred milliseconds never trips it, and a body that never ends grows memory without limit. A leg's
`timeout_minutes` and Ctrl-C must hold whatever the server does. Each call therefore carries a
`CallBounds`: an absolute deadline on the monotonic clock (capped by what is left of the leg), a
maximum response size, and the run's interrupt flag. Whatever reads the response (an HTTP transport
wrapper, a pipe reader) passes each chunk through `guard_chunks`, which raises a typed error the moment
a bound is crossed, so a slow or endless response costs at most the bound, never more.

A blocked read (no byte at all) is bounded by the per-read timeout, which callers set to
`bounds.read_timeout(configured)`: never longer than what is left of the deadline.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace

from research_dispatch.core.errors import CallTimedOut, Interrupted, ResponseTooLarge

MAX_RESPONSE_BYTES = 8 * 1024 * 1024
"""Largest response body any single call may return. A chat completion with a full report is ~100 KB,
a search or extract answer a few hundred KB; anything near this is a fault, not an answer."""

MIN_READ_TIMEOUT_S = 0.05


@dataclass(frozen=True)
class CallBounds:
    """The bounds of one call. `deadline` is a `time.monotonic()` value."""

    deadline: float
    max_bytes: int = MAX_RESPONSE_BYTES
    interrupt: threading.Event | None = None
    clock: Callable[[], float] = time.monotonic

    @classmethod
    def within(cls, seconds: float, *, leg_deadline: float | None = None, max_bytes: int = MAX_RESPONSE_BYTES,
               interrupt: threading.Event | None = None,
               clock: Callable[[], float] = time.monotonic) -> CallBounds:
        """Bounds for a call that may take `seconds`, but never past the leg's own deadline."""
        deadline = clock() + max(0.0, seconds)
        if leg_deadline is not None:
            deadline = min(deadline, leg_deadline)
        return cls(deadline=deadline, max_bytes=max_bytes, interrupt=interrupt, clock=clock)

    def remaining(self) -> float:
        return self.deadline - self.clock()

    def read_timeout(self, configured: float) -> float:
        """The per-read timeout to give the client: the configured one, never past the deadline."""
        return max(MIN_READ_TIMEOUT_S, min(configured, self.remaining()))

    def check(self, what: str) -> None:
        """Raise if the run was interrupted or the deadline has passed."""
        if self.interrupt is not None and self.interrupt.is_set():
            raise Interrupted(f"{what}: interrupted")
        if self.clock() >= self.deadline:
            raise CallTimedOut(f"{what}: no complete response within the call's deadline")

    def with_max_bytes(self, max_bytes: int) -> CallBounds:
        return replace(self, max_bytes=max_bytes)


def guard_chunks(chunks: Iterable[bytes], bounds: CallBounds, what: str) -> Iterator[bytes]:
    """Yield the chunks of a response body, raising as soon as any bound is crossed."""
    received = 0
    bounds.check(what)
    for chunk in chunks:
        received += len(chunk)
        if received > bounds.max_bytes:
            raise ResponseTooLarge(f"{what}: response larger than {bounds.max_bytes} bytes; reading stopped")
        bounds.check(what)
        yield chunk
