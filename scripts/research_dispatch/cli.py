"""The `research-dispatch` command line: a thin click layer over the stage modules.

Exit codes (FIXED): 0 ok, 1 runtime failure, 2 bad input or usage, 3 route fidelity not verified.
Stage modules are imported inside each command (each block says `# lazy:`) so that `--help` does not pay
for pydantic, openai, tavily or PyGithub: the one place in the product where imports are deferred
(tests/test_architecture.py holds every other module to imports at the top).
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from research_dispatch import __version__
from research_dispatch.core.errors import BadInput, DispatchError, ExitCode
from research_dispatch.core.interrupt import handling_interrupts, reason
from research_dispatch.core.redact import redact
from research_dispatch.core.sanitize import for_log

F = TypeVar("F", bound=Callable[..., Any])


def _say(line: str, err: bool = False) -> None:
    """A line a command prints that may carry untrusted text (gateway and search errors, model, provider
    and page text, an artifact's fields and file names): `sanitize.for_log` shows any terminal escape
    sequence as text (OSC 52, CSI) and, for the job log in Actions, breaks any workflow command in it (`::`
    at a line's start, `##[` anywhere) and any mention."""
    click.echo(for_log(line), err=err)


def _fail(message: str, code: ExitCode) -> None:
    for line in redact(message).splitlines() or [""]:  # a list of problems: one `error:` line each
        _say(f"error: {line}", err=True)
    sys.exit(code)


def guarded(func: F) -> F:
    """Map typed errors to their exit codes with one clear line; never show a traceback to users."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            # Ctrl-C and SIGTERM: the command's interrupt path, with a backstop (interrupt.py)
            with handling_interrupts():
                return func(*args, **kwargs)
        except DispatchError as exc:
            _fail(str(exc), exc.exit_code)
        except KeyboardInterrupt:
            _fail(reason(), ExitCode.FAILED)
        except Exception as exc:
            if os.environ.get("RESEARCH_DISPATCH_DEBUG"):
                raise
            _fail(f"internal error: {type(exc).__name__}: {exc} (set RESEARCH_DISPATCH_DEBUG=1 for a traceback)",
                  ExitCode.FAILED)
        return None

    return wrapper  # type: ignore[return-value]


def _repository(_ctx: click.Context, _param: click.Parameter, value: Path | None) -> Path:
    """`--repo`/`-C`, or the repository containing the current directory (`fsio.find_repository`)."""
    if value is not None:
        return value
    # lazy: `--help` must not import the stages (module docstring)
    from research_dispatch.core.fsio import find_repository

    found = find_repository(Path.cwd())
    return Path(".") if found == Path.cwd().resolve() else found  # as before when run at the top


repo_option = click.option(
    "-C", "--repo", "repo", type=click.Path(file_okay=False, path_type=Path), default=None, callback=_repository,
    help="Repository holding pyproject.toml and topics/ (default: the one containing the current directory).",
)
json_option = click.option(
    "--json", "as_json", is_flag=True,
    help="Print one JSON document on stdout (its shape: README, JSON output); narration goes to stderr.",
)
cycle_option = click.option(
    "--cycle", envvar="RESEARCH_DISPATCH_CYCLE", default=None,
    help="Refresh cycle id (default: YYYY-H1 or YYYY-H2 of today).",
)


def _print_document(document: dict[str, Any]) -> None:
    """`--json`: the one document on stdout."""
    # lazy: `--help` must not import the stages (module docstring)
    from research_dispatch.run.documents import dumps

    click.echo(dumps(document))


def _narrate(line: str) -> None:
    """Narration while a `--json` command runs: on stderr, so stdout holds the document alone."""
    _say(line, err=True)


def _cycle(value: str | None) -> str:
    # lazy: `--help` must not import the stages (module docstring)
    from research_dispatch.config.plan import current_cycle, validate_cycle

    return validate_cycle(value) if value else current_cycle()


def _split(value: str | None, option: str | None = None) -> list[str]:
    """Comma- or space-separated ids. Unset or empty means "all" (a workflow passes an empty input);
    a value of only separators (`--topics ',,,'`, `--models ' '`) is bad input, never "all"."""
    parts = [part.strip() for part in (value or "").replace(" ", ",").split(",") if part.strip()]
    if value and not parts and option:
        raise BadInput(f"{value!r} names nothing; give ids separated by commas, or leave the option out for all",
                       path=option)
    return parts


def _runner_file(variable: str) -> Path:
    """A runner file the command will append to, checked before any work (exit 2 naming it)."""
    # lazy: `--help` must not import the stages (module docstring)
    from research_dispatch.core.ghactions import require_runner_file

    return require_runner_file(os.environ, variable)


def _load(repo: Path) -> tuple[Any, list[Any]]:
    # lazy: `--help` must not import the stages (module docstring)
    from research_dispatch.config.settings import load_settings
    from research_dispatch.config.topics import load_topics

    settings = load_settings(repo)
    return settings, load_topics(repo, settings)


def _writer(repo: Path, settings: Any, command: str) -> Any:
    """The repository lock for a writing command (one writer at a time; see `core/lock.py`)."""
    # lazy: `--help` must not import the stages (module docstring)
    from research_dispatch.leg.files import writer_lock

    return writer_lock(repo, settings.build_dir, command, warn=lambda message: _say(f"warning: {message}"))


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    """`--version`: the version and the commit it was built from (`build_info`), then exit."""
    if not value or ctx.resilient_parsing:
        return
    # lazy: `--help` must not import the stages (module docstring)
    from research_dispatch.core.build_info import version_line

    click.echo(version_line(__version__))
    ctx.exit()


class WorkflowOrder(click.Group):
    """`--help` lists the commands in the order a lead meets them (set up, try, check, plan, run, verify),
    then, in a section of their own, the steps the workflow runs in CI, one job each, in job order (issue 30.8):
    alphabetical order put `collect`, CI plumbing, second, beside `init`."""

    PEOPLE = ("init", "demo", "check", "plan", "run", "verify")
    CI_STEPS = ("notify", "research", "collect", "synthesize", "publish")  # in job order: notify follows plan

    def list_commands(self, ctx: click.Context) -> list[str]:
        names = set(self.commands)
        known = [*self.PEOPLE, *self.CI_STEPS]
        people = [n for n in self.PEOPLE if n in names] + sorted(names - set(known))
        return people + [n for n in self.CI_STEPS if n in names]

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        shown = [(name, command) for name in self.list_commands(ctx)
                 if (command := self.get_command(ctx, name)) is not None and not command.hidden]
        if not shown:
            return
        limit = formatter.width - 6 - max(len(name) for name, _ in shown)
        sections = (("Commands", [item for item in shown if item[0] not in self.CI_STEPS]),
                    ("CI steps (the workflow runs them, one job each)",
                     [item for item in shown if item[0] in self.CI_STEPS]))
        for title, items in sections:
            if items:
                with formatter.section(title):
                    formatter.write_dl([(name, command.get_short_help_str(limit)) for name, command in items])


@click.group(cls=WorkflowOrder,
             context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_print_version,
              help="Show the version and the commit it was built from, and exit.")
def main() -> None:
    """Keep a multi-model literature review fresh: one researcher per (topic, model), cited reports with
    route provenance, a cross-family synthesis, and one pull request for human review."""


@main.command()
@repo_option
@click.option("--online", is_flag=True, help="Also ask the services, spending nothing: every key (the gateway's and "
              "its credit, Tavily's through its free GET /usage), every model and what its calls need (with "
              "did-you-mean), MCP servers, and with GITHUB_TOKEN and GITHUB_REPOSITORY the schedule's state.")
@click.option("--github-summary", is_flag=True, help="Append the report to $GITHUB_STEP_SUMMARY.")
@click.option("--github-output", is_flag=True, help="Append the JSON document as `check=` to $GITHUB_OUTPUT (the "
              "workflow's notify job reads it).")
@json_option
@guarded
def check(repo: Path, online: bool, github_summary: bool, github_output: bool, as_json: bool) -> None:
    """Validate [tool.research-dispatch] and every topic file; print one line per problem, all at once."""
    # lazy: `--help` must not import the stages (module docstring)
    from research_dispatch.run.check import check_command

    report: Any = None
    if online:
        # lazy: only --online loads the gateway, search and MCP clients
        from research_dispatch.run.online import online_report as report

    sys.exit(check_command(repo, online=report, as_json=as_json, github_summary=github_summary,
                           github_output=github_output, env=os.environ, say=_say,
                           err=lambda line: _say(line, err=True), print_document=_print_document))


@main.command()
@repo_option
@click.option("--topics", "topic_ids", default=None, help="Comma-separated topic ids (default: all).")
@click.option("--models", "model_ids", default=None, help="Comma-separated model slugs to keep.")
@click.option("--github-output", is_flag=True, help="Also append matrix=, count=, cycle= and the jobs' timeouts "
              "(research-minutes=, synthesize-minutes=) to $GITHUB_OUTPUT.")
@click.option("--github-summary", is_flag=True, help="Also append the plan for people (legs, caps, worst case, "
              "estimate) to $GITHUB_STEP_SUMMARY.")
@click.option("--json", "as_json", is_flag=True, help="Print the matrix JSON (with worst_case_usd and estimate_usd) "
              "even on a terminal.")
@click.option("--publishing", type=click.BOOL, default=False, show_default=True,
              help="This refresh will publish: also refuse a cycle whose PR was closed without merging (needs "
              "GITHUB_TOKEN, GITHUB_REPOSITORY), before any leg is paid for.")
@cycle_option
@guarded
def plan(repo: Path, topic_ids: str | None, model_ids: str | None, github_output: bool, github_summary: bool,
         as_json: bool, publishing: bool, cycle: str | None) -> None:
    """On a terminal: the legs, their caps, the worst-case spend and an estimate. Piped or with --json:
    the matrix JSON {"include": [{"leg", "topic", "model"}, ...], "worst_case_usd", "estimate_usd"}.

    With --github-output (the workflow's plan job) also what the jobs need, derived from the caps:
    `research-minutes` and `synthesize-minutes` (the jobs' timeouts); a plan no hosted job can hold, or a
    cycle git refuses as a branch name, is refused here, before any leg is paid for."""
    # lazy: `--help` must not import the stages (module docstring)
    from research_dispatch.config.plan import (
        job_time_problems,
        matrix,
        matrix_json,
        plan_legs,
        refresh_branch,
        research_job_minutes,
        synthesize_job_minutes,
        write_github_output,
    )
    from research_dispatch.config.topics import select_topics  # lazy: as the block above

    target = _runner_file("GITHUB_OUTPUT") if github_output else None
    if github_summary:
        _runner_file("GITHUB_STEP_SUMMARY")
    settings, topics = _load(repo)
    legs = plan_legs(select_topics(topics, _split(topic_ids, "--topics")), settings, _split(model_ids, "--models"))
    cycle_id = _cycle(cycle)
    refresh_branch(settings, cycle_id)
    text = matrix_json(legs)
    too_long = job_time_problems(legs, settings) if target is not None else []
    if too_long:
        raise too_long[0]
    if publishing:
        # lazy: `--help` must not import the stages (module docstring), and PyGithub only when publishing
        from research_dispatch.publish.pulls import require_target
        from research_dispatch.publish.readiness import require_open_cycle

        require_open_cycle(settings, require_target(os.environ), refresh_branch(settings, cycle_id), cycle_id,
                           remedy="dispatch with dry-run")
    if as_json or not sys.stdout.isatty():  # FIXED: the matrix JSON, with what the plan may cost beside it
        # lazy: `--help` must not import the stages (module docstring)
        from research_dispatch.config.estimate import plan_document

        click.echo(plan_document(settings, legs))
    else:
        # lazy: `--help` must not import the stages (module docstring)
        from research_dispatch.config.estimate import plan_lines

        for line in plan_lines(settings, legs, cycle_id):
            click.echo(line)
    if github_summary:
        # lazy: `--help` must not import the stages (module docstring)
        from research_dispatch.config.estimate import plan_markdown
        from research_dispatch.core.ghactions import append_step_summary

        append_step_summary(os.environ, plan_markdown(settings, legs, cycle_id))
    if target is not None:
        write_github_output(target, {"matrix": text, "count": str(len(matrix(legs)["include"])),
                                     "legs": str(len(legs)), "cycle": cycle_id,
                                     "research-minutes": str(research_job_minutes(legs, settings)),
                                     "synthesize-minutes": str(synthesize_job_minutes(settings))})


@main.command()
@repo_option
@click.argument("topic")
@click.option("--model", "model", default=None, help="Model slug (comma-separated for a packed batch).")
@click.option("--export", "export_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Also copy each leg's report, call log, status and trace into this folder (a CI artifact).")
@cycle_option
@guarded
def research(repo: Path, topic: str, model: str | None, export_dir: Path | None, cycle: str | None) -> None:
    """Run one leg (or a packed batch) and write its report and call log at their computed paths."""
    # lazy: `--help` must not import the stages (module docstring)
    from research_dispatch.config.plan import plan_legs, resolve_legs
    from research_dispatch.core.errors import Interrupted
    from research_dispatch.core.ghactions import run_url
    from research_dispatch.leg.execute import run_leg
    from research_dispatch.publish.accumulate import set_aside_edited
    from research_dispatch.run.collect import export_leg
    from research_dispatch.run.preflight import Work, preflight

    settings, topics = _load(repo)
    legs = resolve_legs(topics, settings, topic, model)
    cycle_id = _cycle(cycle)
    preflight(repo, settings, Work(cycle=cycle_id, legs=legs, planned=plan_legs(topics, settings),
                                   export_dir=export_dir), os.environ)
    codes = []
    with _writer(repo, settings, "research"):
        for leg in legs:
            set_aside_edited(repo, settings, leg, _say)  # asked for explicitly: the edit is kept aside
            result = run_leg(repo, settings, leg, cycle=cycle_id, run_url=run_url(os.environ))
            codes.append(result.exit_code)
            _say(_leg_line(result))
            if result.interrupted:
                raise Interrupted(f"{reason()}; {leg.stem} is recorded as interrupted in "
                                  f"{leg.status_relpath(settings)}")
            if export_dir is not None:
                export_leg(repo, settings, leg, export_dir)
    if ExitCode.FAILED in codes:
        sys.exit(ExitCode.FAILED)
    if ExitCode.ROUTE_UNVERIFIED in codes:
        sys.exit(ExitCode.ROUTE_UNVERIFIED)


def _leg_line(result: Any) -> str:
    # lazy: `--help` must not import the stages (module docstring)
    from research_dispatch.core.sanitize import one_line

    head = f"{result.stem}: {result.status}"
    if result.status == "failed":  # the money is said even when the leg failed after spending
        return f"{head} — {one_line(result.error or 'failed', 300)} ({result.calls} calls, ${result.cost_usd:.4f})"
    line = (f"{head}, route {result.route}, {result.words} words, {result.sources} sources, "
            f"{result.calls} calls, ${result.cost_usd:.4f} → {result.report}")
    if result.reasons:
        line += " (" + "; ".join(one_line(r, 160) for r in result.reasons) + ")"
    return line


@main.command()
@repo_option
@click.argument("incoming", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option("--topics", "topic_ids", default=None, help="Comma-separated topic ids (default: all).")
@click.option("--models", "model_ids", default=None, help="Comma-separated model slugs to keep.")
@click.option("--synthesis", "with_synthesis", is_flag=True,
              help="Also import the synthesis document, ledger, call log and methodology table.")
@guarded
def collect(repo: Path, incoming: Path, topic_ids: str | None, model_ids: str | None, with_synthesis: bool) -> None:
    """Import leg artifacts from INCOMING into their computed paths, validating each file."""
    # lazy: `--help` must not import the stages (module docstring)
    from research_dispatch.config.plan import plan_legs
    from research_dispatch.config.topics import select_topics
    from research_dispatch.run.collect import collect as collect_files

    settings, topics = _load(repo)
    legs = plan_legs(select_topics(topics, _split(topic_ids, "--topics")), settings, _split(model_ids, "--models"))
    with _writer(repo, settings, "collect"):
        result = collect_files(repo, settings, incoming, legs, synthesis=with_synthesis)
    _say(f"imported {len(result.imported)} file(s); missing: {', '.join(result.missing) or 'nothing'}")
    for line in result.rejected:
        _say(f"rejected: {line}", err=True)
    for line in result.ignored:
        _say(f"ignored: {line}", err=True)
    if result.rejected:
        sys.exit(ExitCode.FAILED)


@main.command()
@repo_option
@click.argument("reports", nargs=-1, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--online", is_flag=True, help="Re-check each generation id against the gateway's /generation record.")
@click.option("--github-summary", is_flag=True, help="Append the route table to $GITHUB_STEP_SUMMARY.")
@json_option
@guarded
def verify(repo: Path, reports: tuple[Path, ...], online: bool, github_summary: bool, as_json: bool) -> None:
    """Print the route table for reports (default: all of research/); exit 3 if any is not verified.

    Cited sources without evidence (and a missing or changed evidence file) are warned about, one
    line each; they never change the exit code."""
    # lazy: `--help` must not import the stages (module docstring)
    from research_dispatch.config.settings import load_settings
    from research_dispatch.leg.files import try_complete_pending
    from research_dispatch.leg.report import load_report
    from research_dispatch.leg.verify import (
        evidence_lines,
        markdown_evidence,
        markdown_table,
        text_table,
        verify_report,
    )

    if github_summary:
        _runner_file("GITHUB_STEP_SUMMARY")
    settings = load_settings(repo)
    for line in try_complete_pending(repo, settings.build_dir):  # a killed writer's committed unit
        _say(line, err=True)
    paths = list(reports) or sorted((repo / settings.research_dir).glob("*.md"))
    if not paths:
        raise BadInput("no reports to verify", path=settings.research_dir + "/")
    with contextlib.ExitStack() as stack:  # the online gateway's connections are closed when the rows are made
        gateway = None
        if online:
            # lazy: `--help` must not import the stages (module docstring)
            from research_dispatch.gateway.client import generation_gateway

            gateway = stack.enter_context(generation_gateway(settings.gateway, os.environ))
        rows = [verify_report(load_report(p if p.is_absolute() or p.exists() else repo / p, repo=repo),
                              gateway=gateway, trust_self_reported=settings.gateway.trust_self_reported)
                for p in paths]
    _say(text_table(rows), err=as_json)
    for row in rows:  # narration: stderr, like every problem line
        for problem in row.problems:
            _say(f"problem: {row.relpath}: {problem}", err=True)
    for line in evidence_lines(rows):
        _say(line, err=as_json)
    if as_json:
        # lazy: `--help` must not import the stages (module docstring)
        from research_dispatch.run.documents import verify_document

        _print_document(verify_document(rows))
    if github_summary:
        # lazy: `--help` must not import the stages (module docstring)
        from research_dispatch.core.ghactions import append_step_summary

        evidence = markdown_evidence(rows)
        append_step_summary(os.environ, "## Route fidelity\n\n" + markdown_table(rows)
                            + (f"\n\n{evidence}" if evidence else ""))
    if not all(row.verified for row in rows):
        sys.exit(ExitCode.ROUTE_UNVERIFIED)


@main.command()
@repo_option
@click.option("--github-summary", is_flag=True, help="Append the synthesis summary and claim diff to "
              "$GITHUB_STEP_SUMMARY.")
@cycle_option
@guarded
def synthesize(repo: Path, github_summary: bool, cycle: str | None) -> None:
    """Write the synthesis, the claims ledger and the methodology table; print the claim diff.

    First the cycle's refresh branch (local or remote-tracking) is overlaid: its newer good reports come
    into research/, so the synthesis describes the reports the branch will hold."""
    # lazy: `--help` must not import the stages (module docstring)
    from research_dispatch.config.settings import load_settings
    from research_dispatch.run.preload import GATEWAY_MODULES, import_worker_modules
    from research_dispatch.run.refresh import overlay_for_synthesis
    from research_dispatch.synthesis.command import synthesize_command

    if github_summary:
        _runner_file("GITHUB_STEP_SUMMARY")
    settings = load_settings(repo)
    cycle_id = _cycle(cycle)
    import_worker_modules(GATEWAY_MODULES)  # the synthesis calls the gateway from a thread pool (preload.py)
    with _writer(repo, settings, "synthesize"):
        keep = overlay_for_synthesis(repo, settings, cycle_id, os.environ, _say)
        if keep:
            return
        sys.exit(synthesize_command(repo, cycle=cycle_id, env=os.environ, echo=_say,
                                    github_summary=github_summary, narrate=_narrate))


@main.command()
@repo_option
@click.option("--branch", default=None, help="Refresh branch (default: <branch_prefix><cycle>).")
@click.option("--base", default=None, help="Base branch of the PR (default: config pr.base).")
@click.option("--no-push", is_flag=True, help="Commit locally; do not push.")
@click.option("--no-pr", is_flag=True, help="Do not create or update the pull request.")
@click.option("--dry-run", is_flag=True, help="Print the PR title and body only; write nothing.")
@click.option("--github-summary", is_flag=True, help="Append the PR (or its preview) to $GITHUB_STEP_SUMMARY.")
@click.option("--topics", "topic_ids", default=None, help="Only these topic ids' legs (default: all).")
@click.option("--models", "model_ids", default=None, help="Only legs routed to these model slugs.")
@click.option("--allow-edited", is_flag=True, help="Commit reports edited by hand (trailer `Edited: yes`) instead of "
              "refusing them with exit 2.")
@click.option("--synthesis-failed", type=click.BOOL, default=False, show_default=True,
              help="This refresh's synthesis failed (the workflow passes its synthesize job's result): publish the "
              "good reports without it, as a partial PR that says the synthesis is missing.")
@cycle_option
@guarded
def publish(repo: Path, branch: str | None, base: str | None, no_push: bool, no_pr: bool, dry_run: bool,
            github_summary: bool, topic_ids: str | None, model_ids: str | None, allow_edited: bool,
            synthesis_failed: bool, cycle: str | None) -> None:
    """Commit (one per changed report, one for the synthesis), push, and create or update the PR."""
    # lazy: `--help` must not import the stages (module docstring)
    from research_dispatch.config import environment
    from research_dispatch.config.plan import plan_legs
    from research_dispatch.config.topics import select_topics
    from research_dispatch.publish import publish_command

    if github_summary:
        _runner_file("GITHUB_STEP_SUMMARY")
    if not (no_push or no_pr or dry_run):
        environment.require(os.environ, environment.GITHUB)  # the token is one token; the API URL https
    legs = None
    if topic_ids or model_ids:
        settings, topics = _load(repo)
        legs = plan_legs(select_topics(topics, _split(topic_ids, "--topics")), settings,
                         _split(model_ids, "--models"))
    failure = "the synthesize job of this run failed (its log says why)" if synthesis_failed else ""
    sys.exit(publish_command(repo, branch=branch, base=base, push=not no_push, open_pr=not no_pr,
                             dry_run=dry_run, cycle=_cycle(cycle), env=os.environ, echo=_say,
                             github_summary=github_summary, legs=legs, allow_edited=allow_edited,
                             synthesis_failure=failure))


@main.command()
@repo_option
@click.option("--topics", "topic_ids", default=None, help="Comma-separated topic ids (default: all).")
@click.option("--models", "model_ids", default=None, help="Comma-separated model slugs to keep.")
@click.option("--jobs", type=click.IntRange(1, 64), default=None, help="Legs in parallel (default: config jobs).")
@click.option("--publish/--no-publish", "do_publish", default=True, show_default=True,
              help="Commit the refresh to its local branch at the end.")
@click.option("--push", is_flag=True, help="Also push the branch and open or update the PR.")
@click.option("--fresh", is_flag=True, help="Redo every leg, even those with a good report this cycle (reports "
              "edited by hand are moved to build/edited/ first).")
@click.option("--allow-edited", is_flag=True, help="Publish reports edited by hand (trailer `Edited: yes`).")
@json_option
@cycle_option
@guarded
def run(repo: Path, topic_ids: str | None, model_ids: str | None, jobs: int | None, do_publish: bool, push: bool,
        fresh: bool, allow_edited: bool, as_json: bool, cycle: str | None) -> None:
    """The whole refresh locally: legs in parallel with live progress, then verify, synthesize, publish."""
    # lazy: `--help` must not import the stages (module docstring)
    from research_dispatch.run.refresh import run_command, run_refresh

    if not as_json:
        topics, models = _split(topic_ids, "--topics"), _split(model_ids, "--models")
        sys.exit(run_command(repo, topics=topics, models=models, jobs=jobs, publish=do_publish, push=push,
                             fresh=fresh, cycle=_cycle(cycle), env=os.environ, echo=_say,
                             allow_edited=allow_edited))
    # lazy: `--help` must not import the stages (module docstring)
    from research_dispatch.config.settings import load_settings
    from research_dispatch.core.errors import DispatchError
    from research_dispatch.run.documents import refused_run_document, run_document

    try:
        topics, models = _split(topic_ids, "--topics"), _split(model_ids, "--models")
        outcome = run_refresh(repo, topics=topics, models=models, jobs=jobs, publish=do_publish, push=push,
                              fresh=fresh, cycle=_cycle(cycle), env=os.environ, echo=_narrate, live=False,
                              allow_edited=allow_edited)
        document = run_document(outcome, repo, load_settings(repo))
    except DispatchError as exc:  # bad input (exit 2) or a held lock: still one document on stdout
        _print_document(refused_run_document(str(exc), exc.exit_code, cycle))
        raise
    _print_document(document)
    sys.exit(outcome.exit_code)


@main.command()
@click.option("-C", "--repo", "repo", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Run on this repository's own topics and configuration (default: this project's reference "
                   "review).")
@click.option("--dir", "directory", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where to build the demo repository, recreated each time (default: build/demo; with --repo, "
                   "demo/ in that repository's build directory).")
@click.option("-v", "--verbose", is_flag=True, help="Print the whole run (it is always in the demo's build/demo.log).")
@json_option
@guarded
def demo(repo: Path | None, directory: Path | None, verbose: bool, as_json: bool) -> None:
    """The whole refresh offline on built-in fake servers: no keys, no network."""
    # lazy: `--help` must not import the stages (module docstring)
    from research_dispatch.adopt.demo import run_demo

    outcome = run_demo(directory, repo=repo, echo=_narrate if as_json else click.echo, verbose=verbose)
    if as_json:
        _print_document(outcome.document())
    sys.exit(outcome.exit_code)


@main.command()
@repo_option
@click.option("--check", "check_json", envvar="RESEARCH_DISPATCH_CHECK", default="", show_envvar=True,
              help="The `check --json` document of the plan job (the workflow passes its `check` output).")
@click.option("--plan-result", type=click.Choice(["success", "failure", "cancelled", "skipped"]), required=True,
              help="The plan job's result: success closes the cannot-start issue, failure opens or updates it.")
@guarded
def notify(repo: Path, check_json: str, plan_result: str) -> None:
    """Open, update or close the one issue that says a refresh cannot start (CI: the notify job, after plan)."""
    # lazy: `--help` must not import the stages (module docstring)
    from research_dispatch.run.notify import notify_command

    sys.exit(notify_command(repo, check=check_json, plan_result=plan_result, env=os.environ, echo=_say))


@main.command()
@click.option("-C", "--repo", "repo", type=click.Path(file_okay=False, path_type=Path), default=".", show_default=True,
              help="The top level of an existing git repository.")
@click.option("--force", is_flag=True, help="Overwrite generated files that differ (never pyproject.toml's existing "
              "content).")
@click.option("--ref", default=None, help="Pin the workflows to this research-dispatch commit (full sha) or tag "
              "(default: the commit this package was installed from, else the tag v<version>).")
@click.option("--upstream", default=None, help="The research-dispatch repository the workflows call, owner/name "
              "(default: research-dispatch/research-dispatch).")
@guarded
def init(repo: Path, force: bool, ref: str | None, upstream: str | None) -> None:
    """Set up a git repository for research-dispatch: config, an example topic, the workflows, docs."""
    # lazy: `--help` must not import the stages (module docstring)
    from research_dispatch.adopt.init import init_command

    sys.exit(init_command(repo, ref=ref, upstream=upstream, force=force, echo=click.echo))


if __name__ == "__main__":  # pragma: no cover
    main()
