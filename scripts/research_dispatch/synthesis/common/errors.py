"""Typed errors of the synthesis stage.

A failed extraction or judgement is an exception that carries the gateway calls it made (so the call
log stays complete) and a one-line reason (so the synthesis can list it under limitations). Nothing
here is ever turned into an empty result.
"""

from __future__ import annotations

from research_dispatch.core.errors import DispatchError, ExitCode
from research_dispatch.gateway.provenance import CallRecord


class StructuredCallFailed(DispatchError):
    """A structured-output call did not produce valid output: gateway failure or invalid twice."""

    exit_code = ExitCode.FAILED

    def __init__(self, message: str, *, records: list[CallRecord] | None = None) -> None:
        super().__init__(message)
        self.records: list[CallRecord] = list(records or [])


class StructuredOutputInvalid(StructuredCallFailed):
    """The model's answer failed pydantic validation, and so did the retry with the error fed back."""


class TimeLimitReached(StructuredCallFailed):
    """The synthesis' overall time limit (`synthesis.timeout_minutes`) passed before this call finished."""


class SynthesisFailed(DispatchError):
    """The synthesis cannot be produced at all (e.g. every extraction failed). Nothing is written."""

    exit_code = ExitCode.FAILED
