"""One retry policy for every outbound call: the model gateway's, the search providers' and GitHub's.

Why one: a retry is the same decision whoever makes it — is the failure one an identical request can
get past, are retries left, how long to wait — and three hand-written loops had drifted apart (one
honoured `Retry-After`, one capped its back-off, one did neither). Here the caller says what it knows
of a failure (`Failure`: retryable or not, the wait the service asked for, a floor the service
documents), and the policy decides (`RetryPolicy.decide`):

* a failure that is not retryable, or one past `max_retries`, is given up at once;
* a wait the service asks for (`Retry-After`, a rate-limit reset) is waited exactly — unless it is
  longer than `max_wait_s`, which is given up at once and said (a run must end within a known time);
* otherwise the wait is exponential back-off, `backoff_base_s * 2**attempt` capped at `backoff_max_s`,
  spread by `jitter` (a share of itself, so parallel legs do not retry in step), and never less than
  the service's floor;
* a wait that would end past the caller's deadline is given up too: the caller's own time limit is a
  cap, never a reason to sleep through it.

`RetryPolicy.call` is the loop for callers with nothing to record between attempts (the search
providers, GitHub). The gateway keeps its own loop, because it records every attempt (a `CallRecord`
each, an abandoned attempt billed), but asks `decide` exactly the same question. `sleep` is injectable,
so tests record the waits instead of waiting them.
"""

from __future__ import annotations

import enum
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Failure:
    """What a caller knows of one failed attempt, in the policy's terms."""

    retryable: bool
    retry_after_s: float | None = None  # the wait the service asked for (Retry-After, a rate-limit reset)
    at_least_s: float = 0.0  # a floor the service documents (GitHub's secondary rate limit: a minute)
    reason: str = ""  # what failed, in words, for the caller's messages


class GiveUp(str, enum.Enum):
    """Why the policy stops retrying."""

    NOT_RETRYABLE = "not retryable"
    EXHAUSTED = "retries exhausted"
    WAIT_TOO_LONG = "the service asks to wait longer than the policy waits"
    DEADLINE = "the wait would end past the caller's deadline"


@dataclass(frozen=True)
class Decision:
    """Wait `wait_s` and try again, or give up (`give_up` says why; `wait_s` is then the wait refused)."""

    wait_s: float
    give_up: GiveUp | None = None

    @property
    def retry(self) -> bool:
        return self.give_up is None


@dataclass(frozen=True)
class RetryPolicy:
    """Attempts, back-off, the longest wait a service may ask for, and the sleep (see the module)."""

    max_retries: int = 3
    backoff_base_s: float = 1.0
    backoff_max_s: float = 30.0
    max_wait_s: float = 120.0
    jitter: float = 0.25  # a share of the back-off added at random (0: exact waits)
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False, compare=False)

    def backoff(self, attempt: int) -> float:
        """Our own wait before retry `attempt + 1` (the first retry follows attempt 0)."""
        wait = min(self.backoff_base_s * (2 ** attempt), self.backoff_max_s)
        return float(wait * (1 + random.random() * self.jitter)) if self.jitter else float(wait)

    def decide(self, attempt: int, failure: Failure, *, deadline: float | None = None) -> Decision:
        """Retry after attempt `attempt` (0-based) failed with `failure`, or give up? `deadline` is a
        `time.monotonic()` value no wait may reach."""
        if not failure.retryable:
            return Decision(0.0, GiveUp.NOT_RETRYABLE)
        if attempt >= self.max_retries:
            return Decision(0.0, GiveUp.EXHAUSTED)
        asked = failure.retry_after_s
        demanded = max(asked if asked is not None else 0.0, failure.at_least_s)
        if demanded > self.max_wait_s:
            return Decision(demanded, GiveUp.WAIT_TOO_LONG)
        wait = max(asked, 0.0) if asked is not None else max(self.backoff(attempt), failure.at_least_s)
        if deadline is not None and time.monotonic() + wait >= deadline:
            return Decision(wait, GiveUp.DEADLINE)
        return Decision(wait)

    def call(self, attempt: Callable[[], T], judge: Callable[[Exception], Failure | None], *,
             retrying: Callable[[Failure, int, float], None] | None = None,
             give_up: Callable[[Exception, Failure, Decision, int], BaseException] | None = None) -> T:
        """`attempt()` until it returns or the policy gives up.

        `judge` says what an exception means (None: not a failure this policy handles, raised at once);
        `retrying(failure, retry number, wait)` is told before each wait; when the policy gives up,
        `give_up(error, failure, decision, attempts)` names the exception to raise (default: the error)."""
        number = 0
        while True:
            try:
                return attempt()
            except Exception as exc:
                failure = judge(exc)
                if failure is None:
                    raise
                decision = self.decide(number, failure)
                if not decision.retry:
                    if give_up is None:
                        raise
                    raise give_up(exc, failure, decision, number + 1) from None
            number += 1
            if retrying is not None:
                retrying(failure, number, decision.wait_s)
            self.sleep(decision.wait_s)
