"""What a run did: with each leg (`Activity`, `LegOutcome`), and as a whole (`RunOutcome`, its exit code).

The typed result of `run` that the summary prints (`run/summary.py`), the demo checks and the tests
read. Exit code: 1 if any leg failed or did not start, a later stage failed, or the run was
interrupted; 3 if every leg has its report but some route is not verified; 0 otherwise.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from research_dispatch.config.plan import Leg
from research_dispatch.core.errors import ExitCode
from research_dispatch.leg.resume import Decision
from research_dispatch.leg.standing import Candidate
from research_dispatch.leg.status import LegResult, LegState
from research_dispatch.leg.verify import RouteRow
from research_dispatch.publish.command import PublishResult
from research_dispatch.publish.worktree import PutBack
from research_dispatch.synthesis.pipeline import SynthesisResult


class Activity(str, enum.Enum):
    """What this run did with a leg (where the leg then stands is its `LegState`)."""

    QUEUED = "queued"
    RAN = "ran"
    KEPT = "kept"  # a good report of this cycle stands and its inputs are unchanged
    SKIPPED = "skipped"  # its report was edited by hand: never regenerated silently
    NOT_STARTED = "not started"

    def __str__(self) -> str:
        return self.value


@dataclass
class LegOutcome:
    """One leg of this run: what was decided, what this run did, and where the leg stands after it."""

    leg: Leg
    decision: Decision
    activity: Activity
    note: str = ""
    result: LegResult | None = None
    state: LegState = LegState.MISSING  # after the run, from the repository (`leg/state.assess`)
    worktree: Candidate | None = None  # the working tree's report after the run, as `leg/state` read it
    cost_usd_before: float = 0.0  # the standing report's cost, for kept legs

    @property
    def stem(self) -> str:
        return self.leg.stem

    @property
    def ran(self) -> bool:
        return self.result is not None

    @property
    def label(self) -> str:
        """This run's word for the leg: the attempt's outcome (ok, degraded, failed) or the activity."""
        if self.result is not None:
            return self.result.status.value
        return self.activity.value

    @property
    def good(self) -> bool:
        return self.state.has_report


@dataclass
class RunOutcome:
    """Everything `run` did, for the summary, the demo and the tests."""

    cycle: str
    legs: list[LegOutcome] = field(default_factory=list)
    routes: list[RouteRow] = field(default_factory=list)
    synthesis: SynthesisResult | None = None
    publication: PublishResult | None = None
    stage_errors: list[str] = field(default_factory=list)
    synthesis_error: str = ""  # why the synthesis failed (also in stage_errors); the reports still publish
    interrupted: bool = False
    legs_cost_usd: float = 0.0
    branch_changed: bool = False
    put_back: PutBack | None = None  # the checkout put back once the refresh branch held the results
    wall_s: float = 0.0
    exit_code: ExitCode = ExitCode.FAILED

    def stems(self, *labels: str) -> list[str]:
        """Legs whose label in this run (ok, degraded, failed, kept, skipped, not started) is one of these."""
        return [o.stem for o in self.legs if o.label in labels]

    @property
    def ran(self) -> list[str]:
        return [o.stem for o in self.legs if o.ran]

    @property
    def cost_usd(self) -> float:
        synthesis_usd = self.synthesis.cost_usd if self.synthesis is not None else 0.0
        return round(self.legs_cost_usd + synthesis_usd, 6)

    def final_exit_code(self) -> ExitCode:
        """The run's exit code (module docstring)."""
        if self.interrupted or self.stage_errors or self.stems("failed", "not started", "queued"):
            return ExitCode.FAILED
        if any(not row.verified for row in self.routes):
            return ExitCode.ROUTE_UNVERIFIED
        return ExitCode.OK
