"""`check --online`: what can only be known by asking the services, every problem at once.

* the gateway key works: one cheap authenticated look-up (`GET /key`), no model call;
* every model the plan and the synthesis name exists and lists what its calls need
  (`gateway.catalogue`: the same check `run` and `research` make before their first leg), with the
  nearest listed ids for a typo;
* every MCP server a planned topic names starts and lists the tools its allow-list names.

Each problem is one line naming the file (or variable) and the field; the command prints them all and
exits 2. A gateway that cannot be reached at all is one problem, not a traceback. Search keys are not
spent on: a Tavily or Exa search costs credits, so their keys are only checked to be set (`check`
without `--online` does that too, through `environment`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from research_dispatch.config.plan import Leg
from research_dispatch.config.settings import Settings
from research_dispatch.core.errors import AuthenticationFailed, DispatchError, GatewayError
from research_dispatch.gateway.catalogue import ModelsRefused, model_problems, model_uses, parse_catalogue
from research_dispatch.gateway.client import Gateway, credentials
from research_dispatch.gateway.provenance import OPENROUTER
from research_dispatch.tools.mcp_servers import McpToolset


def gateway_problems(settings: Settings, legs: Sequence[Leg], env: Mapping[str, str]) -> list[str]:
    """The key and the models, asked of the configured gateway."""
    if settings.gateway.kind != OPENROUTER:
        return []  # an openai-compatible gateway lists no models or endpoints (DESIGN: no such look-ups)
    try:
        found = credentials(env, settings.gateway)
    except DispatchError as exc:
        return [str(exc)]
    with Gateway(api_key=found.key, base_url=found.base_url, settings=settings.gateway) as gateway:
        try:
            gateway.listing("/key", "the key's record (GET /key)")
        except AuthenticationFailed as exc:
            return [f"environment: OPENROUTER_API_KEY: the gateway refused the key ({exc})"]
        except GatewayError as exc:
            return [f"environment: OPENROUTER_BASE_URL: the gateway did not answer GET /key ({exc})"]
        try:
            catalogue = parse_catalogue(gateway.listing("/models", "the model list (GET /models)"))
        except GatewayError as exc:
            return [f"environment: OPENROUTER_BASE_URL: the gateway did not list its models ({exc})"]
        return [p.line() for p in model_problems(model_uses(settings, legs), catalogue, gateway.endpoints)]


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


def mcp_problems(settings: Settings, legs: Sequence[Leg], env: Mapping[str, str]) -> list[str]:
    """Every MCP server a planned topic names: started, its allowed tools listed, stopped again."""
    names = sorted({name for leg in legs for name in leg.topic.mcp})
    if not names:
        return []
    problems: list[str] = []
    with McpToolset({n: settings.mcp.servers[n] for n in names}, env=env) as toolset:
        toolset.open()
        for name, problem in sorted(toolset.start_problems.items()):
            problems.append(f"pyproject.toml: tool.research-dispatch.mcp.servers.{name}: {problem}")
    return problems


def online_problems(settings: Settings, legs: Sequence[Leg], env: Mapping[str, str]) -> list[str]:
    """Everything `check --online` asks the services, as one list of one-line problems."""
    return gateway_problems(settings, legs, env) + mcp_problems(settings, legs, env)
