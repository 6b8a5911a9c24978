"""The pull-request title and body, after Renovate and Dependabot (one bot-owned PR per branch, found again
by a hidden marker; a body that says what changed and why; a comment instead of a rewrite when a person
edited the branch).

Why so careful: the body mixes our own facts with text that came from models and the web (status
reasons, served model and provider names, claim text). A model must not be able to forge the bot's
hidden marker, ping people, hide text behind bidi overrides or push the body past GitHub's 65,536
characters. So every untrusted piece passes through `sanitize` here, marker-like text is defanged, the
bot's one marker is added by this module alone, and the finished body is redacted and then capped.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from research_dispatch.config.schedule import ENABLE_COMMAND, INACTIVITY_DAYS, SCHEDULE_WORKFLOW, Outlook
from research_dispatch.core import sanitize
from research_dispatch.core.redact import redact, register_secrets
from research_dispatch.leg.standing import LegAssessment
from research_dispatch.leg.status import LegState
from research_dispatch.publish.gitops import CommitInfo
from research_dispatch.synthesis.count.decisions import matrix, matrix_markdown
from research_dispatch.synthesis.write.diff import diff_ledgers

BODY_LIMIT = 65_536
MARKER_NAME = "research-refresh:v1"
TRUNCATED_NOTE = "\n\n---\n…*[Pull request body truncated to 65,536 characters]*\n"
_MARKER_LIKE = re.compile(r"(research-refresh)\s*:\s*(v\d+)", re.IGNORECASE)
_ALLOWED_TAG = re.compile(r"</?(?:details|summary|br|b|i|em|strong|code|sub|sup|kbd|p)(?:\s+open)?\s*/?>",
                          re.IGNORECASE)
_STATE_ICON = {LegState.OK: "✅", LegState.DEGRADED: "⚠️", LegState.UNVERIFIED: "⚠️", LegState.EDITED: "✍️",
               LegState.FAILED: "❌", LegState.STALE: "❔", LegState.INVALID: "❌", LegState.MISSING: "❔"}


def marker(cycle: str) -> str:
    """The bot's hidden, machine-readable marker: the only HTML comment a body ever carries."""
    return f"<!-- {MARKER_NAME} cycle={cycle} -->"


def defang(text: str) -> str:
    """Break anything that looks like our marker name, so untrusted text cannot imitate it."""
    return _MARKER_LIKE.sub(r"\1 \2", text)


def inline(text: str, limit: int = 300) -> str:
    """Untrusted text as one safe Markdown line."""
    return defang(sanitize.for_pr_body(sanitize.one_line(str(text), limit)))


def cell(text: str, limit: int = 120) -> str:
    return inline(text, limit).replace("|", "\\|")


def block(markdown: str) -> str:
    """Untrusted multi-line Markdown (the claim diff): comments, controls and raw HTML out, and
    `sanitize.inert_markdown` (no mention, issue reference, link, image, autolink, math or workflow command).

    A small set of formatting tags (`<details>`, `<summary>`, ...) survives so a collapsible diff
    still renders; every other `<` is escaped.
    """
    text = sanitize.strip_html_comments(sanitize.strip_invisible(markdown))
    text = sanitize.inert_markdown(text)
    out: list[str] = []
    position = 0
    for match in _ALLOWED_TAG.finditer(text):
        out.append(text[position:match.start()].replace("<", "&lt;"))
        out.append(match.group(0))
        position = match.end()
    out.append(text[position:].replace("<", "&lt;"))
    return defang("".join(out)).strip()


def render_title(cycle: str, *, reports: int, synthesis: bool, failed: int, unverified: int,
                 complete: int | None = None, planned: int | None = None, synthesis_stale: bool = False,
                 missing: int = 0, stale: int = 0, invalid: int = 0, synthesis_missing: bool = False) -> str:
    """`docs(research): refresh <cycle> — N reports, synthesis[, k failed][, m missing][, s stale][, i invalid]
    [, j unverified]`: the legs without a report of this cycle counted by their `LegState` (each word is the
    state the body's tables show); while some planned leg is not complete the title says so:
    `refresh <cycle> (partial: c/p legs) — …`, and while no synthesis describes the reports too:
    `(partial: synthesis missing)` or `(partial: c/p legs, synthesis missing)`."""
    partial = complete is not None and planned is not None and complete < planned
    head = f"docs(research): refresh {cycle}"
    gaps = [f"{complete}/{planned} legs"] if partial else []
    gaps += ["synthesis missing"] if synthesis_missing else []
    if gaps:
        head += f" (partial: {', '.join(gaps)})"
    title = f"{head} — {reports} report{'s' if reports != 1 else ''}"
    if synthesis:
        title += ", synthesis"
    if synthesis_stale:
        title += ", synthesis not updated"
    if failed:
        title += f", {failed} failed"
    if missing:
        title += f", {missing} missing"
    if stale:
        title += f", {stale} stale"
    if invalid:
        title += f", {invalid} invalid"
    if unverified:
        title += f", {unverified} unverified"
    return title


@dataclass
class BodyFacts:
    """Everything the body says. Entries and claim-diff text are untrusted; the rest is ours."""

    cycle: str
    branch: str
    base: str
    base_sha: str
    entries: list[LegAssessment]
    synthesis_changed: list[str]
    framework_doc: str
    claim_diff: str | None  # Markdown from the synthesis' ledger diff, or None
    claim_diff_short: str | None  # the same with fewer items, used when the body would be too long
    claim_note: str  # shown when there is no diff (e.g. "Synthesis not available")
    run_url: str | None  # the workflow run (`ghactions.run_url`), None outside Actions
    agreement: str | None = None  # the synthesis' agreement matrix (decisions × families), Markdown; untrusted
    synthesis_cost_usd: float = 0.0
    changed: set[str] = field(default_factory=set)  # stems whose report this PR adds or changes
    removed: list[str] = field(default_factory=list)  # reports of legs no longer planned, removed
    synthesis_note: str = ""  # why the synthesis was not updated (stale), or that it was edited by hand
    notes: list[str] = field(default_factory=list)  # what GitHub could not do (draft state), said once
    notice: str | None = None  # the repository's standing notice (`core.notice`: a demo says so)
    synthesis_missing: bool = False  # no synthesis describes these reports: the PR is partial until one does
    schedule: Outlook | None = None  # the next cycle, and when GitHub pauses the schedule without activity


def incomplete(entries: Iterable[LegAssessment]) -> list[LegAssessment]:
    """Planned legs without a good report of this cycle (or whose route is not verified)."""
    return [e for e in entries if not e.complete]


def without_report(entries: Iterable[LegAssessment]) -> list[LegAssessment]:
    """Planned legs with no report of this cycle standing for them (failed, missing, stale or invalid)."""
    return [e for e in entries if not e.state.has_report]


def _summary(facts: BodyFacts) -> list[str]:
    changed = [e for e in facts.entries if e.stem in facts.changed]
    topics = len({e.leg.topic.id for e in changed})
    families = len({e.leg.family for e in changed})
    line = (f"This PR refreshes **{len(changed)}** research report{'s' if len(changed) != 1 else ''} "
            f"({topics} topic{'s' if topics != 1 else ''}, {families} model famil{'ies' if families != 1 else 'y'})")
    if facts.synthesis_missing:
        line += "; **the synthesis is missing** (see below)."
    elif facts.synthesis_changed:
        line += f" and regenerates the synthesis (`{facts.framework_doc}`)."
    else:
        line += "; the synthesis is unchanged."
    lines = [line]
    missing = without_report(facts.entries)
    unverified = [e for e in facts.entries if e.unverified]
    warnings = []
    gaps = incomplete(facts.entries)
    if gaps:
        warnings.append(f"**Partial refresh: {len(facts.entries) - len(gaps)} of {len(facts.entries)} planned legs "
                        "have a good report of this cycle.**")
    if missing:
        names = ", ".join(f"`{e.stem}`" for e in missing[:20]) + (" …" if len(missing) > 20 else "")
        warnings.append(f"**{len(missing)} leg{'s' if len(missing) != 1 else ''} without a report of this cycle** "
                        f"({names}).")
    if unverified:
        names = ", ".join(f"`{e.stem}`" for e in unverified[:20]) + (" …" if len(unverified) > 20 else "")
        warnings.append(f"**{len(unverified)} route{'s' if len(unverified) != 1 else ''} not verified** "
                        f"({names}): another model or provider than requested may have written it.")
    if facts.synthesis_note:
        warnings.append(inline(facts.synthesis_note, 600))
    if warnings:
        lines += ["", "> [!WARNING]"]
        lines += [f"> {w}" for w in warnings]
        if gaps or facts.synthesis_missing:
            lines.append("> This PR stays a draft, labelled `partial`, until the refresh is re-run or the gaps are "
                         "accepted.")
    for note in facts.notes:
        lines += ["", f"> [!NOTE]\n> {inline(note, 600)}"]
    return lines


def _route_table(facts: BodyFacts) -> list[str]:
    lines = ["### Route fidelity", "",
             "| Topic | Requested model | Served model | Provider | Verdict | Words | Cost | Status |",
             "|---|---|---|---|---|---:|---:|---|"]
    for e in facts.entries:
        row = e.row
        served = ", ".join(row.served_models) if row and row.served_models else "—"
        provider = ", ".join(row.served_providers) if row and row.served_providers else "—"
        verdict = "—" if row is None else (f"✅ {row.route}" if row.verified else f"⚠️ {row.route}")
        words = str(row.words) if row else "—"
        cost = f"${e.cost_usd:.4f}" if (row or e.cost_usd) else "—"
        changed = e.stem in facts.changed
        change = "" if not e.state.has_report and not changed else (" · updated" if changed else " · unchanged")
        status = f"{_STATE_ICON.get(e.state, '')} {e.state}{change}".strip()
        if e.last_attempt_failed and e.state.has_report:
            status += " · last attempt failed"
        values = [cell(e.leg.topic.id), cell(e.leg.route.model), cell(served), cell(provider), cell(verdict),
                  words, cost, cell(status)]
        lines.append("| " + " | ".join(values) + " |")
    return lines


def _problems(entries: Iterable[LegAssessment]) -> list[str]:
    lines = ["### Failed, degraded or missing legs", ""]
    listed = [e for e in entries if e.state is not LegState.OK or e.last_attempt_failed]
    if not listed:
        return [*lines, "None: every planned leg produced a report with a verified route."]
    for e in listed:
        reasons = list(e.reasons)
        if e.row is not None and e.unverified:
            served = ", ".join(e.row.served_models) or "no recorded model"
            reasons.insert(0, f"route {e.row.route} (served by {served})")
        text = "; ".join(inline(r, 300) for r in reasons[:6]) or "no reason recorded"
        if len(reasons) > 6:
            text += f"; … {len(reasons) - 6} more"
        icon = _STATE_ICON.get(e.state, "⚠️")
        lines.append(f"- {icon} `{e.stem}` ({cell(e.leg.route.model)}) — **{e.state}**: {text}")
    return lines


def _removed(facts: BodyFacts) -> list[str]:
    if not facts.removed:
        return []
    lines = ["### Removed: reports of legs no longer planned", "",
             "No topic file plans these legs any more (a topic renamed or removed, a model dropped); the refresh "
             "removes them, and the synthesis does not count them:", ""]
    lines += [f"- `{cell(path, 200)}`" for path in facts.removed[:50]]
    if len(facts.removed) > 50:
        lines.append(f"- … {len(facts.removed) - 50} more")
    return lines


def _cost(facts: BodyFacts) -> list[str]:
    refreshed = sum(e.report_cost_usd for e in facts.entries if e.stem in facts.changed)
    failed = sum(e.failed_attempt_cost_usd for e in facts.entries)
    total = refreshed + failed + facts.synthesis_cost_usd
    parts = [f"${refreshed:.4f} for the refreshed reports"]
    if facts.synthesis_cost_usd:
        parts.append(f"${facts.synthesis_cost_usd:.4f} for the synthesis")
    if failed:
        parts.append(f"${failed:.4f} spent on failed attempts")
    return ["### Cost", "", f"**${total:.4f}** reported by the gateway: " + ", ".join(parts) + "."]


def _checklist(facts: BodyFacts) -> list[str]:
    gaps = incomplete(facts.entries)
    topics = ",".join(sorted({e.leg.topic.id for e in gaps}))
    lines = ["### Review checklist", "",
             "- [ ] Spot-check sources and citations in the changed reports",
             "- [ ] Every route verdict is `exact`, or the deviation is acceptable",
             "- [ ] The synthesis reflects the report changes (claim diff above)"]
    if gaps:
        lines.append(f"- [ ] Incomplete legs: re-run them (Actions → research-refresh → Run workflow, "
                     f"topics=`{topics}`) or accept the partial refresh")
    if facts.synthesis_missing:
        lines.append("- [ ] The synthesis is missing: re-run it (the workflow's failed jobs, or `research-dispatch "
                     "synthesize` then `publish`) before merging")
    return lines


def _details(facts: BodyFacts) -> list[str]:
    changed = sum(1 for e in facts.entries if e.stem in facts.changed)
    gaps = len(incomplete(facts.entries))
    run = f"[run log]({facts.run_url})" if facts.run_url else "a local run (no run URL)"
    synthesis = ", ".join(f"`{p}`" for p in facts.synthesis_changed) or "none"
    return ["<details><summary>Run details</summary>", "",
            f"Cycle `{facts.cycle}` · branch `{facts.branch}` → `{facts.base}` (base `{facts.base_sha[:12]}`) · {run}",
            "",
            f"Planned legs: {len(facts.entries)} · refreshed reports: {changed} · "
            f"complete: {len(facts.entries) - gaps} · incomplete: {gaps} · removed: {len(facts.removed)}",
            "",
            f"Synthesis files changed: {synthesis}",
            "", "</details>"]


def schedule_line(outlook: Outlook | None, base: str) -> str:
    """The 📅 line: when the schedule runs next, and the date by which GitHub pauses it without activity
    (counted from the last commit on the base branch, which merging this PR moves) with the one command
    that re-enables it — where the lead looks, in time (issue 30.1)."""
    line = f"📅 **Schedule** (`{SCHEDULE_WORKFLOW}`, plus manual runs of `research-refresh.yml`)"
    if outlook is None:
        return line + "."
    line += f": the next cycle is {outlook.next_cycle()}. "
    line += (f"GitHub pauses a public repository's schedule after {INACTIVITY_DAYS} days without activity: counting "
             f"from the last commit on `{base}` ({outlook.last_activity:%Y-%m-%d}), on "
             f"**{outlook.pauses_on:%Y-%m-%d}**")
    line += ", before the next cycle" if outlook.pauses_first else ""
    return line + (" (merging this PR counts as activity). If it pauses, re-enable it with "
                   f"`{ENABLE_COMMAND}`; `research-dispatch check --online` says whether it is active.")


def _configuration(facts: BodyFacts) -> list[str]:
    return ["<details><summary>Configuration</summary>", "",
            schedule_line(facts.schedule, facts.base),
            "",
            "♻ **Updating**: re-running this cycle (all topics or some) updates this branch: for every planned "
            "leg it keeps the newest good report of the cycle from any run, **unless someone else has pushed to "
            "it**; then the bot only comments.",
            "",
            "🚦 **Merging**: never automatic. Review the reports and the synthesis, then merge.",
            "",
            "🔕 **Closing**: closing skips this cycle; the next cycle opens a new PR.",
            "", "</details>"]


def _render(facts: BodyFacts, claim_diff: str | None) -> str:
    diff = block(claim_diff) if claim_diff and claim_diff.strip() else inline(facts.claim_note, 300)
    footer = "This PR was generated by research-dispatch"
    if facts.run_url:
        footer += f" · [run log]({facts.run_url})"
    sections = [
        [marker(facts.cycle), *([f"> **{inline(facts.notice, 400)}**", ""] if facts.notice else []),
         *_summary(facts)],
        _route_table(facts),
        ["### Claim diff", "", diff],
        ["### Agreement matrix", "", "What each model family's counted reports hold on each decision (for / against "
         "/ conditional; on a divergence, the side), or why they hold none: *not asked* (no counted report of the "
         "family covers the decision's topics) or *no side* (asked, it took none).", "", block(facts.agreement)]
        if facts.agreement else [],
        _problems(facts.entries),
        _removed(facts),
        _cost(facts),
        _checklist(facts),
        _details(facts),
        ["---", "", *_configuration(facts)],
        ["---", footer],
    ]
    return "\n\n".join("\n".join(section) for section in sections if section) + "\n"


def cap(body: str, limit: int = BODY_LIMIT) -> str:
    """At most `limit` characters, with a visible note when something was cut."""
    if len(body) <= limit:
        return body
    return body[: limit - len(TRUNCATED_NOTE)].rstrip() + TRUNCATED_NOTE


def render_body(facts: BodyFacts, *, secrets: Iterable[str] = (), limit: int = BODY_LIMIT) -> str:
    """The whole body: rendered, redacted, and capped (a shorter claim diff first, then a hard cut)."""
    register_secrets(secrets)

    def finish(text: str) -> str:
        return redact(text)

    body = finish(_render(facts, facts.claim_diff))
    if len(body) > limit and facts.claim_diff_short is not None:
        body = finish(_render(facts, facts.claim_diff_short))
    return cap(body, limit)


def claim_diff(old_text: str | None, new_path: Path, rel: str) -> tuple[str | None, str | None, str]:
    """(diff Markdown, a shorter one, a note) from the synthesis' ledger diff; never raises: without a
    ledger, or with one that cannot be diffed, the body says so instead of failing the PR.
    """
    if not new_path.is_file():
        return None, None, f"Synthesis not available: there is no claims ledger (`{rel}`) in this refresh."
    try:
        new = json.loads(new_path.read_text(encoding="utf-8"))
        old = json.loads(old_text) if old_text else None
        diff = diff_ledgers(old, new)
        if diff.is_empty:
            return None, None, "No claim changes against the base branch's ledger."
        return diff.markdown(max_items=50), diff.markdown(max_items=10), ""
    except Exception as exc:  # a generated ledger that does not parse must not stop the PR
        return None, None, f"Claim diff unavailable ({type(exc).__name__}); see `{rel}`."


def agreement_matrix(new_path: Path) -> str | None:
    """The agreement matrix of the synthesis' ledger as Markdown, or None; never raises (like `claim_diff`)."""
    if not new_path.is_file():
        return None
    try:
        return matrix_markdown(matrix(json.loads(new_path.read_text(encoding="utf-8"))))
    except Exception:  # a generated ledger that does not parse must not stop the PR
        return None


def blocked_comment(cycle: str, branch: str, tip: str, foreign: list[CommitInfo]) -> str:
    """Renovate's "Edited/Blocked" notice: what the bot saw, what it did not do, how to hand back."""
    listed = "\n".join(f"- `{c.sha[:12]}` by {inline(c.author_name, 80)}" for c in foreign[:20])
    if len(foreign) > 20:
        listed += f"\n- … and {len(foreign) - 20} more"
    restore = foreign[0].parents[0][:12] if foreign[0].parents else None
    takeover = (f"let the bot take over again by resetting `{branch}` to `{restore}` (this drops the commits "
                "above); " if restore else "")
    return "\n".join([
        f"<!-- {MARKER_NAME} blocked cycle={cycle} head={tip} -->",
        "### ✋ Edited/Blocked notification", "",
        "research-dispatch will not rebuild this branch, because it does not recognise the author of these "
        "commits and assumes somebody else may have edited the PR:", "",
        listed, "",
        "This run's refresh was **not** pushed; nothing on the branch was changed. To publish a refresh, "
        f"merge or close this PR, or {takeover}then re-run the workflow.",
    ]) + "\n"
