"""Where a leg stands (`LegState`) and the status record of its latest attempt (`LegResult`), with the
one reader and the one writer of the status file `build/legs/<stem>.json`.

The status file is written after every attempt — with the report and call log as one unit when a report
was produced (`leg/files.py`), on its own otherwise (a failure, an interrupt, a crash) — so the run
summary, the synthesis and the workflow can say which legs are missing and what each attempt cost.
It is a *record*: the report decides where a leg stands (`leg/standing.py`), so a damaged status file is a
warning (`read_status`), and a status file the disk refuses never hides the result from the caller
(`write_status`).

This module sits below `leg/execute.py` (which runs an attempt) and `leg/standing.py` (which assesses a leg
from its reports and this record), so neither needs the other's internals: the import cycle between
them is gone.
"""

from __future__ import annotations

import datetime as dt
import enum
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from research_dispatch.config.plan import Leg
from research_dispatch.config.settings import Settings
from research_dispatch.core.errors import ExitCode
from research_dispatch.core.fsio import confined, write_atomic
from research_dispatch.core.records import load_record, record
from research_dispatch.core.redact import redact

MAX_STATUS_BYTES = 256 * 1024


class LegState(str, enum.Enum):
    """Where one planned leg stands in this cycle. One name per state; the values are what files and
    output show (`LegResult.status` of an attempt is OK, DEGRADED or FAILED)."""

    OK = "ok"  # a good report of this cycle, status ok, route verified
    DEGRADED = "degraded"  # a good report of this cycle with status degraded, route verified
    UNVERIFIED = "unverified"  # a good report of this cycle whose route is not verified
    EDITED = "edited"  # the report's body was edited by hand (body_sha256 differs)
    FAILED = "failed"  # this cycle's latest attempt failed and there is no good report of this cycle
    STALE = "stale"  # only a report of an earlier cycle, no attempt this cycle
    INVALID = "invalid"  # a report is there but cannot be used (unreadable, another leg's, a symlink)
    MISSING = "missing"  # no report and no attempt this cycle

    def __str__(self) -> str:
        return self.value

    @property
    def complete(self) -> bool:
        """A good report of this cycle with a verified route, or an accepted hand edit."""
        return self in (LegState.OK, LegState.DEGRADED, LegState.EDITED)

    @property
    def has_report(self) -> bool:
        """A report of this cycle stands for the leg (whatever its route)."""
        return self in (LegState.OK, LegState.DEGRADED, LegState.UNVERIFIED, LegState.EDITED)


def timestamp() -> str:
    """Now, in UTC to the second, as status files and reports record it (`2026-12-01T09:30:00Z`)."""
    return dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


@record
@dataclass
class LegResult:
    """The status record of one leg (also written to build/legs/<stem>.json)."""

    stem: str
    topic: str
    model: str
    family: str
    status: LegState  # OK | DEGRADED | FAILED: how this attempt ended
    reasons: list[str] = field(default_factory=list)
    route: str = "unverified"
    route_verified: bool = False
    report: str | None = None
    calls: int = 0
    cost_usd: float = 0.0
    words: int = 0
    sources: int = 0
    input_hash: str = ""
    cycle: str = ""
    started_at: str = ""
    finished_at: str = ""
    error: str | None = None
    interrupted: bool = False  # stopped by Ctrl-C (status "failed"; no report written)
    body_sha256: str | None = None  # the body_sha256 of the report this attempt wrote (None: it wrote none)

    @property
    def exit_code(self) -> ExitCode:
        if self.status == LegState.FAILED:
            return ExitCode.FAILED
        return ExitCode.OK if self.route_verified else ExitCode.ROUTE_UNVERIFIED

    def to_json(self) -> str:
        data = {**asdict(self), "status": self.status.value, "exit_code": self.exit_code}
        return json.dumps(data, sort_keys=True, indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str) -> LegResult:
        """Parse a status file, every field checked (`records.py`): unknown keys (a newer writer) are
        ignored, a damaged field is a `ValueError` naming it, a status other than an attempt's outcome
        (ok, degraded, failed) is an error."""
        result = load_record(text, cls, required=_STATUS_REQUIRED)
        if result.status not in (LegState.OK, LegState.DEGRADED, LegState.FAILED):
            raise ValueError(f"status: {result.status} is not an attempt's outcome (ok, degraded, failed)")
        return result


_STATUS_REQUIRED = ("stem", "topic", "model", "family", "status")


def write_status(repo: Path, settings: Settings, leg: Leg, result: LegResult, *, quiet: bool = False) -> None:
    """Write the leg's status file (atomically, keys redacted). The one writer, for every attempt.

    `quiet`: a full or read-only disk may refuse the file (`OSError`); it is a record, so the result
    still reaches the caller and the run summary and the previous status file stays. Without `quiet`
    (an interrupted leg, whose status file is how the next run learns it did not finish) the refusal is
    raised. Only the disk's refusal is ever quiet: a status path that leaves the repository
    (`confined`, a `BadInput`) is never swallowed — that is a hostile checkout, not a full disk, and a
    run checks its build directory before any leg starts.
    """
    try:
        write_atomic(confined(repo, leg.status_relpath(settings)), redact(result.to_json()))
    except OSError:
        if not quiet:
            raise


def read_status(repo: Path, settings: Settings, leg: Leg,
                warn: Callable[[str], None] | None = None) -> LegResult | None:
    """The leg's last status record, or None when there is none or it is damaged: a status file is a
    record the run can go on without (the report decides), so damage is a warning, never a crash."""
    path = repo / leg.status_relpath(settings)
    if not path.exists():
        return None
    try:
        if not path.is_file() or path.stat().st_size > MAX_STATUS_BYTES:
            raise ValueError(f"not a regular file of at most {MAX_STATUS_BYTES} bytes")
        return LegResult.from_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, TypeError) as exc:  # UnicodeDecodeError is a ValueError
        if warn is not None:
            warn(f"{leg.status_relpath(settings)}: ignoring a damaged status file ({exc})")
        return None
