"""The JSON documents of `--json` (`check`, `verify`, `run`, `demo`; `plan --json` is the matrix).

Why one module: gh and llm users script the CLI, so each command's `--json` prints ONE JSON document on
stdout (narration goes to stderr) with a shape that is documented (README, "JSON output") and tested,
not whatever the dataclasses happen to hold. Each shape is built here from the stages' typed results;
keys are sorted when printed; paths are repository-relative POSIX strings; money is USD as a float.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from research_dispatch.config.check import Checked
from research_dispatch.core.errors import BadInput, Problem

if TYPE_CHECKING:  # types only: `check` prints its document without the route table's stage, `verify` without a run's
    from research_dispatch.config.settings import Settings
    from research_dispatch.leg.verify import RouteRow
    from research_dispatch.run.outcome import RunOutcome

SCHEMA = "research-dispatch/{command}@1"


def dumps(document: dict[str, Any]) -> str:
    """The document as printed: sorted keys, two-space indent, UTF-8 text. JSON escapes the C0 controls
    in strings; C1 controls (`\\x9b` is a one-byte CSI), bidi and zero-width characters are escaped too
    (`\\u009b`), so a file name in a problem line cannot drive the terminal that shows the document."""
    text = json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False)
    return _UNSHOWN.sub(lambda m: f"\\u{ord(m.group(0)):04x}", text)


_UNSHOWN = re.compile("[\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb]")


CHECK_SCHEMA = "research-dispatch/check@2"
"""`check --json`; @2: problems and warnings are `{file, field, message}` objects (issue 30.3), and `checked`
lists what `--online` asked, one `{subject, status, detail}` each."""


def check_document(*, topics: int, legs: int, online: bool, problems: Sequence[Problem],
                   warnings: Sequence[Problem] = (), checked: Sequence[Checked] = ()) -> dict[str, Any]:
    return {"schema": CHECK_SCHEMA, "ok": not problems, "topics": topics, "legs": legs, "online": online,
            "problems": [p.document() for p in problems], "warnings": [w.document() for w in warnings],
            "checked": [c.document() for c in checked]}


def read_check_document(text: str, *, option: str = "--check") -> tuple[bool, list[Problem]]:
    """(ok, problems) of a `check --json` document handed on (the workflow's plan job to its notify job).
    It came through an artifact-like channel, so it is validated: anything else is `BadInput` naming
    `option`."""
    try:
        document = json.loads(text)
    except ValueError:
        raise BadInput("is not a JSON document (the output of `check --json`)", path=option) from None
    if not isinstance(document, dict) or document.get("schema") != CHECK_SCHEMA \
            or not isinstance(document.get("ok"), bool) or not isinstance(document.get("problems"), list):
        raise BadInput(f"is not a {CHECK_SCHEMA} document", path=option)
    problems = []
    for item in document["problems"]:
        if not isinstance(item, dict) or not isinstance(item.get("message"), str) \
                or not all(item.get(key) is None or isinstance(item[key], str) for key in ("file", "field")):
            raise BadInput("a problem is not {file, field, message}", path=option)
        problems.append(Problem(item.get("file"), item.get("field"), item["message"]))
    return document["ok"], problems


def route_row(row: RouteRow) -> dict[str, Any]:
    return {"report": row.relpath, "topic": row.topic, "requested_model": row.requested_model,
            "requested_provider": row.requested_provider, "served_models": list(row.served_models),
            "served_providers": list(row.served_providers), "route": row.route, "verified": row.verified,
            "status": row.status, "words": row.words, "calls": row.calls, "cost_usd": round(row.cost_usd, 6),
            "problems": list(row.problems)}


def verify_document(rows: Sequence[RouteRow]) -> dict[str, Any]:
    return {"schema": SCHEMA.format(command="verify"), "verified": all(r.verified for r in rows),
            "reports": [route_row(r) for r in rows]}


def _relative(path: Path | None, repo: Path) -> str | None:
    if path is None:
        return None
    try:
        return path.resolve().relative_to(repo.resolve()).as_posix()
    except ValueError:
        return str(path)


def run_document(outcome: RunOutcome, repo: Path, settings: Settings) -> dict[str, Any]:
    legs = []
    for item in outcome.legs:
        result = item.result
        legs.append({"leg": item.stem, "topic": item.leg.topic.id, "model": item.leg.route.model,
                     "this_run": item.label, "state": item.state.value, "note": item.note,
                     "route": result.route if result is not None else None,
                     "words": result.words if result is not None else None,
                     "cost_usd": round(result.cost_usd, 6) if result is not None else 0.0,
                     "report": item.leg.report_relpath(settings)})
    synthesis = outcome.synthesis
    publication = outcome.publication
    return {
        "schema": SCHEMA.format(command="run"), "cycle": outcome.cycle, "exit_code": int(outcome.exit_code),
        "interrupted": outcome.interrupted, "cost_usd": round(outcome.cost_usd, 6),
        "legs_cost_usd": round(outcome.legs_cost_usd, 6), "legs": legs, "stage_errors": list(outcome.stage_errors),
        "synthesis": None if synthesis is None else {
            "document": _relative(synthesis.document_path, repo), "ledger": _relative(synthesis.ledger_path, repo),
            "cost_usd": round(synthesis.cost_usd, 6), "llm_calls": synthesis.llm_calls,
            "incomplete": list(synthesis.incomplete), "warnings": list(synthesis.warnings)},
        "publication": None if publication is None else {
            "branch": publication.branch, "base": publication.base, "commits": len(publication.commits),
            "pushed": publication.pushed, "pr_number": publication.pr_number, "pr_url": publication.pr_url,
            "draft": publication.draft, "partial": publication.partial, "title": publication.title},
        "wall_s": outcome.wall_s, "error": None,
    }


def refused_run_document(message: str, exit_code: int, cycle: str | None) -> dict[str, Any]:
    """`run --json` when the command ends before a run (bad input, exit 2; a held lock): the same keys,
    nothing run, and `error` the one line the command says on stderr, so a caller parsing stdout learns
    why instead of reading an empty document."""
    return {"schema": SCHEMA.format(command="run"), "cycle": cycle, "exit_code": int(exit_code),
            "interrupted": False, "cost_usd": 0.0, "legs_cost_usd": 0.0, "legs": [], "stage_errors": [],
            "synthesis": None, "publication": None, "wall_s": 0.0, "error": message}
