"""What the publisher writes into git: commit messages with the FIXED trailers, and the files it refuses.

(This was `publish/collect.py`; it collected nothing. Where each leg stands is `leg/state`; which report
the branch holds for it is `publish/accumulate`.)

Commit subjects are built from validated data only (topic id, stem, model slugs from the topic file;
served model names reduced to a safe character set). Trailers carry front-matter facts reduced to a safe
character set; free text (status reasons, error messages) never enters a commit. The subject names the
model that actually served the report: `… with M` when it is the requested one, `… by X (requested Y)`
when another model answered, so `git log --oneline` never credits the wrong model.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path

from research_dispatch.config.settings import Settings
from research_dispatch.core import sanitize
from research_dispatch.core.ghactions import safe_run_url
from research_dispatch.core.records import check_value
from research_dispatch.gateway import route
from research_dispatch.leg.standing import LegAssessment

_TRAILER_UNSAFE = re.compile(r"[^A-Za-z0-9 ._:/+()\[\]-]")


def trailer_value(text: str, limit: int = 120) -> str:
    """One safe line for a trailer: no newlines, no markup, a small character set."""
    value = _TRAILER_UNSAFE.sub("", sanitize.one_line(str(text), limit * 2)).strip()
    return value[:limit] or "unknown"


def served_other_models(item: LegAssessment) -> list[str]:
    """Served models that are not the requested one (a dated permaslug counts as the same model)."""
    report = item.report
    if report is None:
        return []
    requested = item.leg.route.model
    return sorted({trailer_value(m, 80) for m in report.meta.served_models if not route.same_model(requested, m)})


def report_message(item: LegAssessment, cycle: str, run_url: str | None) -> str:
    """The commit of one leg's report: a subject naming who wrote it, the FIXED trailers, provenance."""
    assert item.chosen is not None and item.report is not None
    leg, meta, row = item.leg, item.report.meta, item.row
    others = served_other_models(item)
    if item.chosen.edited:
        subject = f"research({leg.topic.id}): {leg.stem} as edited by hand (generated with {leg.route.model})"
    elif others:
        subject = f"research({leg.topic.id}): refresh {leg.stem} by {', '.join(others)} (requested {leg.route.model})"
    else:
        subject = f"research({leg.topic.id}): refresh {leg.stem} with {leg.route.model}"
    body = (f"Refreshes {item.chosen.relpath}: {meta.words} words, {len(meta.sources)} cited sources, "
            f"{meta.calls} gateway calls.")
    if item.chosen.edited:
        body += f" It was edited by hand after it was generated ({'; '.join(item.chosen.edits)}): the trailers " \
                "below describe the generation, not the edit."
    trailers = [f"Requested-Model: {leg.route.model}"]
    trailers += [f"Served-Model: {trailer_value(m)}" for m in sorted(set(meta.served_models))] or \
        ["Served-Model: unknown"]
    trailers += [f"Served-Provider: {trailer_value(p)}" for p in sorted(set(meta.served_providers))] or \
        ["Served-Provider: unknown"]
    verdict = row.route if row is not None else "unverified"
    trailers += [f"Route: {verdict}", f"Report-Status: {meta.status}",
                 f"Generation-Count: {len(meta.generation_ids)}", f"Cost-USD: {meta.usage.cost_usd:.6f}",
                 f"Refresh-Cycle: {cycle}", f"Research-Leg: {leg.stem}"]
    if item.chosen.edited:
        trailers.append("Edited: yes")
    link = safe_run_url(meta.run_url) or run_url
    if link:
        trailers.append(f"Run-Link: {link}")
    return f"{subject}\n\n{body}\n\n" + "\n".join(trailers) + "\n"


def synthesis_message(paths: list[str], cycle: str, run_url: str | None, reports: int, *,
                      edited: bool = False) -> str:
    subject = f"research(synthesis): regenerate for {cycle}"
    body = "Regenerates " + ", ".join(paths) + f" from {reports} report(s)."
    trailers = [f"Refresh-Cycle: {cycle}", f"Synthesis-Reports: {reports}"]
    if edited:
        subject = f"research(synthesis): {cycle} synthesis as edited by hand"
        body += " The synthesis document was edited by hand; nothing it depends on changed, so it was kept."
        trailers.append("Edited: yes")
    if run_url:
        trailers.append(f"Run-Link: {run_url}")
    return f"{subject}\n\n{body}\n\n" + "\n".join(trailers) + "\n"


def synthesis_removal_message(paths: list[str], cycle: str, run_url: str | None) -> str:
    """The commit that takes a synthesis describing other reports off the branch, when this refresh
    could not compute one: a stale synthesis is never left to be read as current (DESIGN, "A failed
    synthesis never loses the legs"). Why it failed is said in the PR body, not here: the reason may
    quote a service's error text, which never goes into a commit."""
    subject = f"research(synthesis): remove the {cycle} synthesis until it can be recomputed"
    body = ("Removes " + ", ".join(paths) + ": they describe other reports than this branch holds, and this "
            "refresh could not compute a synthesis of its own (the pull request says why). Re-run the synthesis "
            "and publish again to add it back.")
    trailers = [f"Refresh-Cycle: {cycle}", "Synthesis-Reports: 0"]
    if run_url:
        trailers.append(f"Run-Link: {run_url}")
    return f"{subject}\n\n{body}\n\n" + "\n".join(trailers) + "\n"


def removal_message(paths: list[str], cycle: str, run_url: str | None) -> str:
    """The commit that removes reports of legs no longer planned (a topic renamed or removed, a model
    dropped): they would otherwise keep shaping the synthesis and be linked from it."""
    subject = f"research: remove {len(paths)} file(s) of legs no longer planned"
    body = "Removes " + ", ".join(paths) + ": no topic file plans these legs any more."
    trailers = [f"Refresh-Cycle: {cycle}"]
    if run_url:
        trailers.append(f"Run-Link: {run_url}")
    return f"{subject}\n\n{body}\n\n" + "\n".join(trailers) + "\n"


def stray_files(repo: Path, settings: Settings, computed: Iterable[str]) -> list[str]:
    """Files in research/ and framework/ that are not computed paths: reported, never committed."""
    known = set(computed) | set(settings.synthesis_relpaths())
    found: list[str] = []
    for directory in (settings.research_dir, settings.framework_dir):
        root = repo / directory
        if root.is_dir():
            found += [p.relative_to(repo).as_posix() for p in sorted(root.rglob("*"))
                      if p.is_file() and not p.name.startswith(".")]
    return [rel for rel in found if rel not in known]


def synthesis_cost(repo: Path, settings: Settings) -> float:
    """Sum of `cost_usd` over the synthesis call log, if there is one (best effort).

    The log may come from a CI artifact: a line that does not parse, or whose cost is not a finite,
    non-negative number (`records.check_value`: a NaN, a negative, a string, a bool), adds nothing, so
    the PR body never shows `$nan` or lets a forged negative cost hide the money spent."""
    path = repo / settings.synthesis_calls_relpath
    total = 0.0
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return 0.0
    for line in lines:
        try:
            data = json.loads(line)
            if not isinstance(data, dict):
                continue
            value = data.get("cost_usd", 0.0)
            check_value("cost_usd", value, float)
        except ValueError:
            continue
        total += float(value)
    return round(total, 6)
