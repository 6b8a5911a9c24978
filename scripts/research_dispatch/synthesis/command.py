"""`research-dispatch synthesize`: run the synthesis and print what it did and what changed.

Typed errors propagate to the CLI, which maps them to exit codes: a report or config that does not
parse is `BadInput` (2), a missing gateway key when a call is needed is `MissingKey` (2), a synthesis
that cannot be produced at all is `SynthesisFailed` (1). Partial failures (one report's extraction, one
judge batch) are not errors: the synthesis lists them under limitations and they are printed here as
warnings.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from research_dispatch.config.settings import load_settings
from research_dispatch.core import sanitize
from research_dispatch.core.errors import ExitCode
from research_dispatch.core.ghactions import append_step_summary
from research_dispatch.core.redact import redact
from research_dispatch.synthesis.pipeline import SynthesisResult, synthesize


def _flagged(counts: dict[str, Any]) -> str:
    """'3 flagged, 2 where only one family was asked' (the second part when some)."""
    alone = counts.get("flagged_only_one_asked") or 0
    return f"{counts['flagged']} flagged" + (f", {alone} where only one family was asked" if alone else "")


def summary_line(result: SynthesisResult) -> str:
    counts = result.counts
    clusters = counts["clusters"]
    skipped = ""
    if counts.get("ignored") or counts.get("failed"):
        skipped = f", {counts.get('ignored', 0)} ignored (not planned), {counts.get('failed', 0)} failed"
    notes = [f"{counts['ties']} without consensus"] if counts.get("ties") else []
    if counts.get("flagged_sides"):
        notes.append(f"{counts['flagged_sides']} divergence side(s) held by one report")
    ties = f" ({'; '.join(notes)})" if notes else ""
    checked = counts.get("checked") or {}
    dropped = counts.get("dropped_claims", 0)
    claims = (f" · claims: {checked['claims']} ({checked['anchored']} anchored: {checked['supported']} with a "
              f"supported citation, {checked['unsupported']} unsupported, {checked['contradicted']} contradicted; "
              f"{checked['counted']} counted" + (f"; {dropped} dropped or not counted, each in the limitations"
                                                  if dropped else "") + ")") if checked else ""
    line = (f"synthesized {counts['reports']} report(s): {counts['counted']} counted, {counts['excluded']} excluded "
            f"(route not verified){skipped}{claims} · findings: {clusters['convergent']} convergent, "
            f"{clusters['same_family']} same-family, {clusters['divergent']} divergent in "
            f"{counts.get('divergences', 0)} divergence(s){ties}, {clusters['single_source']} single-source "
            f"({_flagged(counts)}), {clusters.get('unsupported', 0)} not counted, {clusters['excluded']} "
            f"excluded-only · LLM calls: {result.llm_calls} "
            f"({result.extraction_calls} extraction, {result.cached_extractions} cached; {result.check_calls} "
            f"citation check, {result.cached_checks} citations cached; {result.judge_calls} judge, "
            f"{result.cached_judgements} cached) · ${result.cost_usd:.4f}")
    if result.incomplete:
        line += " · INCOMPLETE: the time limit was reached (see the synthesis' limitations)"
    return line


def synthesize_command(repo: Path, *, cycle: str, env: Mapping[str, str], echo: Callable[[str], None],
                       github_summary: bool = False, narrate: Callable[[str], None] | None = None) -> ExitCode:
    """Run the synthesis; print the summary, the files written, the claim diff and any warnings.
    `narrate` hears the progress lines while it runs (the CLI: stderr, so stdout holds the results)."""
    settings = load_settings(repo)
    say = narrate or echo
    result = synthesize(repo, settings, env=env, cycle=cycle, progress=lambda p: say(p.line()))
    written = [result.document_path, result.ledger_path, result.calls_path]
    if result.methodology_path is not None:
        written.append(result.methodology_path)
    root = repo.resolve()
    echo(redact(summary_line(result)))
    echo("wrote " + ", ".join(p.relative_to(root).as_posix() for p in written))
    echo(redact(result.diff.text()))
    for warning in result.warnings:
        echo(redact(f"warning: {warning}"))
    if github_summary:
        lines = ["## Synthesis", "", sanitize.for_pr_body(summary_line(result)), "", "### Claim diff", "",
                 result.diff.markdown()]
        lines += [f"- warning: {sanitize.for_pr_body(w)}" for w in result.warnings]
        append_step_summary(env, "\n".join(lines))
    return ExitCode.OK
