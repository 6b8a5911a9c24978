"""Typed errors. Each carries the exit code the CLI maps it to, so no stage needs to know about exits.

Exit codes (FIXED): 0 ok, 1 runtime failure, 2 bad input or usage, 3 route fidelity not verified.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Any


class ExitCode(IntEnum):
    """The FIXED exit codes of every command. Use these names, never the bare numbers."""

    OK = 0
    FAILED = 1  # runtime failure (a leg failed, a service or git failed, interrupted)
    BAD_INPUT = 2  # bad input or usage: the message names the file (or variable) and the field
    ROUTE_UNVERIFIED = 3  # every report written, but some route is not verified


@dataclass(frozen=True)
class Problem:
    """One thing wrong with the input, in the house's one-line form `file: field: message`.

    Why a type and not a string: `check --json` prints every problem as `{file, field, message}` (a
    script or an editor integration points at the file and the field without parsing our prose), and the
    same problem is said on a terminal as one line. `file` is a repository-relative path, or
    `environment` for a variable (then `field` is the variable); either may be None when the problem is
    about the whole repository (no topics at all) or the whole file."""

    file: str | None
    field: str | None
    message: str

    def line(self) -> str:
        return "".join(f"{part}: " for part in (self.file, self.field) if part) + self.message

    def document(self) -> dict[str, Any]:
        return {"file": self.file, "field": self.field, "message": self.message}


class DispatchError(Exception):
    """Base class. `exit_code` is what the CLI exits with when this reaches it."""

    exit_code: ExitCode = ExitCode.FAILED


class BadInput(DispatchError):
    """Invalid configuration, topic file, report or argument. Message names the file and the field."""

    exit_code = ExitCode.BAD_INPUT

    def __init__(self, message: str, *, path: str | None = None, field: str | None = None) -> None:
        self.path = path
        self.field = field
        self.message = message
        super().__init__(Problem(path, field, message).line())

    def problems(self) -> list[Problem]:
        """What is wrong, one `Problem` each (a file with several problems says each)."""
        return [Problem(self.path, self.field, self.message)]


class MissingKey(BadInput):
    """A required API key is not set. Raised before any network call. `where` says where to get it."""

    def __init__(self, variable: str, purpose: str, where: str | None = None) -> None:
        super().__init__(f"{variable} is not set; it is required to {purpose}" + (f" ({where})" if where else ""),
                         path="environment", field=variable)
        self.variable = variable


class MissingKeys(MissingKey):
    """Several required keys are not set: every one in one message (one line), each with where to get it,
    so a user sets them all at once instead of meeting them one run at a time."""

    def __init__(self, missing: list[MissingKey]) -> None:
        super().__init__(missing[0].variable, "")
        self.missing = missing
        self.variables = [m.variable for m in missing]
        parts = "; ".join(str(m).removeprefix("environment: ").removeprefix(f"{m.variable}: ") for m in missing)
        self.args = (f"environment: {len(missing)} keys are not set: {parts}",)

    def problems(self) -> list[Problem]:
        return [problem for key in self.missing for problem in key.problems()]


class LockHeld(DispatchError):
    """Another refresh holds the repository lock."""

    exit_code = ExitCode.FAILED


class GatewayError(DispatchError):
    """A gateway call failed for good (after any retries). `status` is the HTTP or envelope code."""

    retryable = False

    def __init__(self, message: str, *, status: int | None = None, error_type: str | None = None,
                 attempts: int = 1) -> None:
        super().__init__(message)
        self.status = status
        self.error_type = error_type
        self.attempts = attempts


class RetryableGatewayError(GatewayError):
    """Rate limits, overload, upstream 5xx, timeouts and resets: worth another attempt."""

    retryable = True

    def __init__(self, message: str, *, retry_after_s: float | None = None, **kwargs: object) -> None:
        super().__init__(message, **kwargs)  # type: ignore[arg-type]
        self.retry_after_s = retry_after_s


class InsufficientCredits(GatewayError):
    """HTTP 402: the account or key has no credit left. Never retried; stops the leg."""


class AuthenticationFailed(GatewayError):
    """HTTP 401: the key is wrong or disabled. Never retried."""


class ErrorInResponse(GatewayError):
    """An HTTP-200 response that carries an error (choices[].error or a top-level error)."""


class SearchError(DispatchError):
    """A search or extract call failed. Tools turn this into a tool error for the model."""

    def __init__(self, message: str, *, status: int | None = None, retryable: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.retryable = retryable


class PublishError(DispatchError):
    """Committing, pushing or talking to GitHub failed."""


class BudgetExceeded(DispatchError):
    """A run-level budget stops new work from starting."""


class CallBoundExceeded(DispatchError):
    """An outbound call (model, search, extract, MCP) went past a bound of `bounds.CallBounds`."""


class CallTimedOut(CallBoundExceeded):
    """The call's wall-clock deadline passed before the whole response arrived (not a per-read timeout)."""


class ResponseTooLarge(CallBoundExceeded):
    """The response grew past the per-call size cap; reading stopped there (bounded memory)."""


class Interrupted(CallBoundExceeded):
    """The user interrupted the run (Ctrl-C): the call and its leg stop at once."""


class GatewayCallTimedOut(CallTimedOut, GatewayError):
    """A model call ran past its wall-clock deadline: both a bound error and a gateway error, so a
    caller that handles either stops the leg honestly. Retryable: the leg still has time left (else it
    is `DeadlineReached`)."""

    retryable = True


class DeadlineReached(GatewayCallTimedOut):
    """A model call cut by its caller's own deadline (a leg's `budget.timeout_minutes`, the synthesis'
    time limit), not by the call's `gateway.timeout_s`: a cap was reached, nothing is wrong with the
    gateway, and no retry can help."""

    retryable = False


class GatewayResponseTooLarge(ResponseTooLarge, GatewayError):
    """A model response grew past the size cap; never retried (a fault, and another attempt costs money)."""


class GatewayInterrupted(Interrupted, GatewayError):
    """The run was interrupted during a model call."""


class UnusableUsage(GatewayError):
    """A completed call reported usage the product cannot account for (a cost that is NaN, negative or
    not a number): the dollar cap can no longer be enforced, so the leg stops instead of guessing."""


class UnsupportedParameters(GatewayError):
    """The pinned model's endpoints do not list a parameter the call cannot do without (tools for a
    researcher, response_format for structured output): refused before any money is spent."""
