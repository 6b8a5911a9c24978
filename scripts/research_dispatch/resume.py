"""Which legs a re-run must redo: the resume rules of `run`.

A leg is *kept* (not run again) only when its last good report for this cycle still stands:

* the report exists and parses, its front matter `cycle` is the current cycle;
* its `status` is `ok` (a degraded report is worth another try) and its route re-verifies from the
  call log as `exact` (the same check `verify` makes);
* its `input_hash` equals the leg's current one — the hash covers the topic file's bytes, the model,
  the pinned provider, the word band, the budget, the search settings and the prompt version, so
  editing any of those reruns exactly the legs they feed;
* the leg's last attempt did not fail (`build/legs/<stem>.json`): a failed attempt after a good report
  means someone asked for it again (e.g. `--fresh`) and it did not finish, so it is redone.

Everything else runs: no report, another cycle, degraded, unverified, changed, last attempt failed,
unreadable. `--fresh` runs every leg. Reports are never deleted here; a failed re-run keeps the
previous report in place (the leg stage never replaces a good report with nothing).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from research_dispatch.config import Settings
from research_dispatch.errors import DispatchError
from research_dispatch.plan import Leg


@dataclass(frozen=True)
class Decision:
    """Run or keep one leg, and why (shown to the user before the legs start)."""

    leg: Leg
    run: bool
    reason: str
    words: int = 0
    route: str = ""
    status: str = ""
    cost_usd: float = 0.0


def decide(repo: Path, settings: Settings, leg: Leg, *, cycle: str, fresh: bool) -> Decision:
    """The resume decision for one leg (see the module docstring for the rules)."""
    from research_dispatch.leg import leg_input_hash, read_status
    from research_dispatch.report import load_report
    from research_dispatch.verify import verify_report

    if fresh:
        return Decision(leg, True, "--fresh")
    path = repo / leg.report_relpath(settings)
    if not path.exists():
        return Decision(leg, True, "no report yet")
    try:
        report = load_report(path, repo=repo)
        row = verify_report(report)
    except (DispatchError, OSError, ValueError) as exc:
        return Decision(leg, True, f"report unreadable ({type(exc).__name__})")
    meta = report.meta
    kept = {"words": meta.words, "route": row.route, "status": meta.status, "cost_usd": meta.usage.cost_usd}
    if meta.cycle != cycle:
        return Decision(leg, True, f"report is from cycle {meta.cycle or 'unknown'}", **kept)
    if meta.input_hash != leg_input_hash(leg, settings):
        return Decision(leg, True, "inputs changed (topic file, model, settings or prompt version)", **kept)
    if meta.status != "ok":
        return Decision(leg, True, f"last report is {meta.status}", **kept)
    if not row.verified:
        return Decision(leg, True, f"route not verified ({row.route})", **kept)
    status = read_status(repo, settings, leg)
    if status is not None and status.status == "failed" and status.cycle == cycle \
            and status.started_at >= meta.started_at:
        return Decision(leg, True, "last attempt failed", **kept)
    return Decision(leg, False, f"good report for {cycle}, inputs unchanged", **kept)


def decide_all(repo: Path, settings: Settings, legs: list[Leg], *, cycle: str, fresh: bool) -> list[Decision]:
    return [decide(repo, settings, leg, cycle=cycle, fresh=fresh) for leg in legs]
