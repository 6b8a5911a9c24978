"""`check --online`: what can only be known by asking the services, every key and model, one line each.

Like `gh auth status`, it says what it checked and what it found, one line per key, model, server and
the schedule, and spends nothing:

* the gateway key through one authenticated look-up (`GET /key`, no model call), with its credit: a
  key limit's remainder below the plan's estimate is a problem (the run would stop short), below the
  worst case a warning;
* the Tavily key through Tavily's free `GET /usage` (api-facts §3.0), with the credits left on the key
  and the plan: none left is a problem, fewer than the plan's legs could spend a warning. Exa offers no
  free key check (a search spends credit), so its key is only checked to be set, and said so;
* every model the plan and the synthesis name: listed at the gateway, and what its calls need
  (`gateway.catalogue`, the same check `run` and `research` make before their first leg), with the
  nearest listed ids for one that is not (a withdrawn model's did-you-mean);
* every MCP server a planned topic names: started, its allowed tools listed, stopped again;
* with GITHUB_TOKEN and GITHUB_REPOSITORY, the schedule workflow's state on GitHub, the next cycle and
  when GitHub pauses it without activity (`publish.schedule`, `config.schedule`); a paused schedule is
  a warning that says the one command that re-enables it.

Problems are `Problem`s naming the file (or variable) and the field; `check` prints them all and exits 2.
A service that cannot be reached is one problem, not a traceback.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from research_dispatch.config import environment
from research_dispatch.config.check import Checked, OnlineReport, Status
from research_dispatch.config.estimate import estimate_plan
from research_dispatch.config.plan import Leg
from research_dispatch.config.schedule import ENABLE_COMMAND, SCHEDULE_PATH, SCHEDULE_WORKFLOW, outlook, read_crons
from research_dispatch.config.settings import Settings
from research_dispatch.config.topics import effective
from research_dispatch.config.uses import ModelUse, model_uses
from research_dispatch.core.bounds import CallBounds
from research_dispatch.core.errors import AuthenticationFailed, BadInput, GatewayError, Problem
from research_dispatch.core.sanitize import one_line
from research_dispatch.gateway.catalogue import Catalogue, ModelsRefused, model_problems, parse_catalogue
from research_dispatch.gateway.client import Gateway, credentials
from research_dispatch.gateway.provenance import OPENROUTER
from research_dispatch.leg.execute import SEARCH_SERVICES
from research_dispatch.publish.pulls import require_target
from research_dispatch.publish.schedule import read_schedule
from research_dispatch.tools.mcp_servers import McpToolset
from research_dispatch.tools.providers import SearchServiceError, TavilyProvider

ENVIRONMENT = "environment"
USAGE_TIMEOUT_S = 30.0
ADVANCED_SEARCH_CREDITS = 2  # Tavily bills an advanced search 2 credits, a basic one 1


def _env_problem(exc: BadInput) -> Problem:
    return exc.problems()[0]


# -- the gateway ------------------------------------------------------------------------------------------


def _credit(report: OnlineReport, record: Any, settings: Settings, legs: Sequence[Leg], variable: str) -> str:
    """The key's credit as said in its line; a limit too small for the plan is a problem or a warning."""
    data = record.get("data") if isinstance(record, Mapping) else None
    limit = data.get("limit") if isinstance(data, Mapping) else None
    remaining = data.get("limit_remaining") if isinstance(data, Mapping) else None
    if not isinstance(remaining, int | float) or isinstance(remaining, bool) or not isinstance(limit, int | float):
        return "no credit limit on the key (it spends the account's credit, which only a management key can read)"
    cost = estimate_plan(settings, legs)
    said = f"${remaining:.2f} left of its ${limit:.2f} limit"
    if legs and remaining < cost.estimate_usd:
        report.problems.append(Problem(ENVIRONMENT, variable, f"the key has ${remaining:.2f} of credit left, less "
                                       f"than this plan's estimate (~${cost.estimate_usd:.2f}): the refresh would "
                                       "stop short; raise the key's limit or add credit"))
    elif legs and remaining < cost.worst_case_usd:
        report.warnings.append(Problem(ENVIRONMENT, variable, f"the key has ${remaining:.2f} of credit left, less "
                                       f"than this plan's worst case (${cost.worst_case_usd:.2f}, its dollar caps)"))
    return said


def check_gateway(report: OnlineReport, settings: Settings, legs: Sequence[Leg], env: Mapping[str, str]) -> None:
    """The gateway key (and its credit), then every model the plan and the synthesis name."""
    try:
        found = credentials(env, settings.gateway)
    except BadInput as exc:
        report.add(Checked("gateway", Status.FAILED, one_line(exc.message, 200)), _env_problem(exc))
        return
    variable = found.service.key_variable
    if settings.gateway.kind != OPENROUTER:
        report.add(Checked("gateway", Status.SKIPPED, f"openai-compatible at {found.base_url}: {variable} is set; "
                           "such a gateway publishes no key record or model list, so neither is checked"))
        return
    with Gateway(api_key=found.key, base_url=found.base_url, settings=settings.gateway) as gateway:
        try:
            record = gateway.listing("/key", "the key's record (GET /key)")
            report.add(Checked("gateway", Status.OK, f"openrouter at {found.base_url}: {variable} accepted; "
                               + _credit(report, record, settings, legs, variable)))
        except AuthenticationFailed as exc:
            report.add(Checked("gateway", Status.FAILED, f"openrouter at {found.base_url}: {variable} refused"),
                       Problem(ENVIRONMENT, variable, f"the gateway refused the key ({exc})"))
        except GatewayError as exc:
            report.add(Checked("gateway", Status.FAILED, f"{found.base_url} did not answer GET /key"),
                       Problem(ENVIRONMENT, found.service.url_variable, f"the gateway did not answer GET /key ({exc})"))
            return
        try:
            catalogue = parse_catalogue(gateway.listing("/models", "the model list (GET /models)"))
        except GatewayError as exc:
            report.add(Checked("models", Status.FAILED, "the gateway did not list its models"),
                       Problem(ENVIRONMENT, found.service.url_variable, f"the gateway did not list its models ({exc})"))
            return
        check_models(report, model_uses(settings, legs), catalogue, gateway.endpoints)


def check_models(report: OnlineReport, uses: Sequence[ModelUse], catalogue: Catalogue,
                 endpoints_of: Callable[[str], Any]) -> None:
    """One line per model: listed, and what each of its uses needs (with the problems of each use)."""
    by_model: dict[str, list[ModelUse]] = {}
    for use in uses:
        by_model.setdefault(use.model, []).append(use)
    for model, model_uses_ in by_model.items():
        problems = model_problems(model_uses_, catalogue, endpoints_of)
        if problems:
            said = "; ".join(dict.fromkeys(p.message.removeprefix(f"{model} ") for p in problems))
            report.add(Checked(f"model {model}", Status.FAILED, said))
            report.problems += problems
            continue
        needs: dict[frozenset[str], list[str]] = {}
        for use in model_uses_:
            needs.setdefault(use.needs, []).append(use.purpose + (f" via {use.provider}" if use.provider else ""))
        takes = "; ".join(f"{', '.join(sorted(need))} ({', '.join(sorted(set(purposes)))})"
                          for need, purposes in sorted(needs.items(), key=lambda item: sorted(item[0])))
        report.add(Checked(f"model {model}", Status.OK, f"listed; takes what its calls need: {takes}"))


# -- search ---------------------------------------------------------------------------------------------


def search_credit_bound(settings: Settings, legs: Sequence[Leg], provider: str) -> int:
    """The most credits the plan's legs could spend on `provider`: every step a search at its depth."""
    total = 0
    for leg in legs:
        _, budget, search = effective(leg.topic, settings)
        if provider in search.providers:
            total += budget.max_steps * (ADVANCED_SEARCH_CREDITS if search.depth == "advanced" else 1)
    return total


def check_search(report: OnlineReport, settings: Settings, legs: Sequence[Leg], env: Mapping[str, str]) -> None:
    """Each search service the planned topics use (else the configured ones): its key, and Tavily's credits."""
    used = sorted({name for leg in legs for name in effective(leg.topic, settings)[2].providers}
                  or set(settings.search.providers))
    for name in used:
        service = SEARCH_SERVICES[name]
        try:
            found = environment.require(env, service)
        except BadInput as exc:
            report.add(Checked(f"search {name}", Status.FAILED, one_line(exc.message, 200)), _env_problem(exc))
            continue
        if name != "tavily":
            report.add(Checked(f"search {name}", Status.SKIPPED, f"{service.key_variable} is set; not checked online: "
                               f"{service.name} offers no free key check (a search spends credit)"))
            continue
        provider = TavilyProvider(api_key=found.key, base_url=found.base_url)
        try:
            credits = provider.usage(bounds=CallBounds.within(USAGE_TIMEOUT_S), timeout_s=USAGE_TIMEOUT_S)
        except SearchServiceError as exc:
            field_ = service.key_variable if exc.kind == "key_rejected" else service.url_variable
            what = "Tavily refused the key (HTTP 401)" if exc.kind == "key_rejected" else \
                f"Tavily did not answer GET /usage ({one_line(str(exc), 200)})"
            report.add(Checked(f"search {name}", Status.FAILED, f"{found.base_url}: {what}"),
                       Problem(ENVIRONMENT, field_, what))
            continue
        finally:
            provider.session.close()
        _say_credits(report, name, found, credits, search_credit_bound(settings, legs, name))


def _say_credits(report: OnlineReport, name: str, found: environment.Credentials, credits: Any, bound: int) -> None:
    key = f"{found.service.key_variable} accepted"
    parts = [f"key {credits.key_usage:,} used" + (f" of {credits.key_limit:,}" if credits.key_limit is not None
                                                   else " (no limit of its own)")]
    if credits.plan_limit is not None:
        parts.append(f"plan {credits.plan} {credits.plan_usage or 0:,} of {credits.plan_limit:,}")
    left = credits.remaining
    detail = f"{found.base_url}: {key}; credits this cycle: {', '.join(parts)}" + \
        (f"; {left:,} left" if left is not None else "") + "; no credit spent"
    variable = found.service.key_variable
    if left == 0:
        report.add(Checked(f"search {name}", Status.FAILED, detail),
                   Problem(ENVIRONMENT, variable, "no Tavily credit is left this billing cycle: every search would be "
                           "refused (HTTP 432); upgrade the plan or wait for the next cycle"))
    elif left is not None and left < bound:
        report.add(Checked(f"search {name}", Status.WARNING, detail),
                   Problem(ENVIRONMENT, variable, f"{left:,} Tavily credit(s) left, fewer than the plan's legs could "
                           f"spend ({bound:,}: every step a search)"), warning=True)
    else:
        report.add(Checked(f"search {name}", Status.OK, detail))


# -- MCP servers ----------------------------------------------------------------------------------------


def check_mcp(report: OnlineReport, settings: Settings, legs: Sequence[Leg], env: Mapping[str, str]) -> None:
    """Every MCP server a planned topic names: started, its allowed tools listed, stopped again."""
    names = sorted({name for leg in legs for name in leg.topic.mcp})
    if not names:
        return
    with McpToolset({n: settings.mcp.servers[n] for n in names}, env=env) as toolset:
        toolset.open()
        for name in names:
            table = f"tool.research-dispatch.mcp.servers.{name}"
            problem = toolset.start_problems.get(name)
            if problem is not None:
                report.add(Checked(f"mcp {name}", Status.FAILED, one_line(problem, 200)),
                           Problem("pyproject.toml", table, problem))
                continue
            tools = sorted(t.name for t in toolset.tools.values() if t.server == name)
            report.add(Checked(f"mcp {name}", Status.OK, f"started; lists {', '.join(tools)}"))


# -- the schedule ---------------------------------------------------------------------------------------


def check_schedule(report: OnlineReport, repo: Path, settings: Settings, env: Mapping[str, str],
                   now: dt.datetime | None = None) -> None:
    """The schedule workflow's state on GitHub and its next cycle (only with a token and a repository)."""
    if not env.get("GITHUB_TOKEN") or not env.get("GITHUB_REPOSITORY"):
        report.add(Checked("schedule", Status.SKIPPED, f"not asked: set GITHUB_TOKEN and GITHUB_REPOSITORY to read the "
                           f"state of {SCHEDULE_WORKFLOW} on GitHub"))
        return
    try:
        target = require_target(env)
    except BadInput as exc:
        report.add(Checked("schedule", Status.FAILED, one_line(exc.message, 200)), _env_problem(exc))
        return
    reading = read_schedule(target, settings.pr)
    if reading.problem is not None:
        report.add(Checked("schedule", Status.WARNING, f"{SCHEDULE_WORKFLOW}: {one_line(reading.problem, 240)}"),
                   Problem(SCHEDULE_PATH, "state", reading.problem), warning=True)
        return
    if not reading.found:
        report.add(Checked("schedule", Status.WARNING, f"{target.repository} has no {SCHEDULE_WORKFLOW} on "
                           f"{reading.default_branch or 'its default branch'}"),
                   Problem(SCHEDULE_PATH, None, "GitHub knows no such workflow on the default branch: nothing "
                           "refreshes the review on a schedule (`research-dispatch init` writes it; push it)"),
                   warning=True)
        return
    now = now or dt.datetime.now(dt.timezone.utc)
    view = outlook(read_crons(repo), reading.last_activity or now.date(), now)
    nxt = f"next cycle {view.next_cycle()}"
    if reading.paused:
        message = (f"GitHub has paused it ({reading.state}): the next cycle will not run until it is re-enabled: "
                   f"`{ENABLE_COMMAND}`")
        report.add(Checked("schedule", Status.WARNING, f"{SCHEDULE_WORKFLOW} is {reading.state}; {nxt}; re-enable "
                           f"it with `{ENABLE_COMMAND}`"), Problem(SCHEDULE_PATH, "state", message), warning=True)
        return
    pause = (f"the last commit on {reading.default_branch} was on {view.last_activity:%Y-%m-%d}, so without "
             f"activity GitHub pauses it on {view.pauses_on:%Y-%m-%d}")
    if view.pauses_first:
        pause += f", before the next cycle: then run `{ENABLE_COMMAND}`"
    report.add(Checked("schedule", Status.OK, f"{SCHEDULE_WORKFLOW} is active; {nxt}; {pause}"))


# -- all of it ------------------------------------------------------------------------------------------


def online_report(repo: Path, settings: Settings, legs: Sequence[Leg], env: Mapping[str, str]) -> OnlineReport:
    """Everything `check --online` asks the services, in the order of a refresh: gateway and models,
    search, MCP servers, then the schedule."""
    report = OnlineReport()
    check_gateway(report, settings, legs, env)
    check_search(report, settings, legs, env)
    check_mcp(report, settings, legs, env)
    check_schedule(report, repo, settings, env)
    return report


def require_models(settings: Settings, legs: Sequence[Leg], env: Mapping[str, str]) -> None:
    """Before the first leg of `run` or `research` (issue 22.3): refuse, exit 2 with one line per
    problem, a plan whose models the gateway does not list or whose calls their endpoints cannot take —
    before any money is spent. Only a definite answer refuses: when the model list cannot be had (the
    gateway is down, the key is refused) the legs run and meet that failure themselves, as before."""
    if settings.gateway.kind != OPENROUTER:
        return
    found = credentials(env, settings.gateway)
    with Gateway(api_key=found.key, base_url=found.base_url, settings=settings.gateway) as gateway:
        try:
            catalogue = parse_catalogue(gateway.listing("/models", "the model list (GET /models)"))
        except GatewayError:
            return
        problems = model_problems(model_uses(settings, legs), catalogue, gateway.endpoints)
    if problems:
        raise ModelsRefused.from_lines([p.line() for p in problems])

