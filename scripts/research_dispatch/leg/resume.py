"""Which legs a re-run must redo: the resume rules of `run`, on the one leg-state rule of `leg/state`.

`run` first overlays the cycle's refresh branch into the working tree, so a leg's standing report may
come from any earlier run (local or CI, this clone or another). Then, from the leg's assessment
(`leg/state.assess_worktree`), a leg is *kept* (not run again) only when its report for this cycle still
stands:

* the report is usable and its front matter `cycle` is the current cycle;
* its `input_hash` equals the leg's current one — the hash covers what the topic file says (its parsed,
  canonical fields: line endings, comments and formatting do not count), the model, the pinned
  provider, the word band, the budget, the search settings and the prompt version, so editing any of
  those reruns exactly the legs they feed (a report written before topics were hashed by meaning
  carries the file's bytes' hash, which still counts: `leg_input_hashes`);
* its `status` is `ok` (a degraded report is worth another try) and its route re-verifies from the
  call log as `exact` (the same check `verify` makes): state `LegState.OK`;
* the leg's last attempt did not fail after it (`build/legs/<stem>.json`): a failed attempt after a good
  report means someone asked for it again (e.g. `--fresh`) and it did not finish, so it is redone.

A report edited by hand (`LegState.EDITED`) is *skipped*: never regenerated silently; `run` warns, and
`--fresh` moves it to `build/edited/` first. Everything else runs: no report, another cycle, degraded,
unverified, changed, last attempt failed, unusable. `--fresh` runs every leg. Reports are never deleted
here; a failed re-run keeps the previous report in place (the leg stage never replaces a good report
with nothing).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path

from research_dispatch.config.plan import Leg
from research_dispatch.config.settings import Settings
from research_dispatch.leg.execute import leg_input_hashes
from research_dispatch.leg.standing import LegAssessment, assess_worktree
from research_dispatch.leg.status import LegState


class ResumeAction(str, enum.Enum):
    RUN = "run"
    KEEP = "keep"
    SKIP_EDITED = "skip"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Decision:
    """Run, keep or skip one leg, and why (shown to the user before the legs start)."""

    leg: Leg
    action: ResumeAction
    reason: str
    assessment: LegAssessment

    @property
    def run(self) -> bool:
        return self.action is ResumeAction.RUN


def decide(repo: Path, settings: Settings, leg: Leg, *, cycle: str, fresh: bool) -> Decision:
    """The resume decision for one leg (see the module docstring for the rules)."""
    item = assess_worktree(repo, settings, leg, cycle=cycle, replace_edited=fresh)

    def run(reason: str) -> Decision:
        return Decision(leg, ResumeAction.RUN, reason, item)

    if fresh:
        return run("--fresh")
    report = item.report
    if item.state is LegState.EDITED:
        return Decision(leg, ResumeAction.SKIP_EDITED, "edited by hand (its body no longer matches body_sha256)", item)
    if report is None:
        unusable = next((c for c in item.candidates if not c.usable), None)
        if unusable is not None:
            return run(f"report unusable ({unusable.problem})")
        stale = next((c for c in item.candidates if c.report is not None), None)
        if stale is not None and stale.report is not None:
            meta = stale.report.meta
            if meta.cycle != cycle:
                return run(f"report is from cycle {meta.cycle or 'unknown'}")
            return run(f"last report is {meta.status}")
        return run("no report yet")
    meta = report.meta
    if meta.input_hash not in leg_input_hashes(leg, settings):
        return run("inputs changed (topic file, model, settings or prompt version)")
    if meta.status != "ok":
        return run(f"last report is {meta.status}")
    if item.row is None or not item.row.verified:
        return run(f"route not verified ({item.row.route if item.row is not None else 'unverified'})")
    if item.last_attempt_failed:
        return run("last attempt failed")
    return Decision(leg, ResumeAction.KEEP, f"good report for {cycle}, inputs unchanged", item)


def decide_all(repo: Path, settings: Settings, legs: list[Leg], *, cycle: str, fresh: bool) -> list[Decision]:
    return [decide(repo, settings, leg, cycle=cycle, fresh=fresh) for leg in legs]
