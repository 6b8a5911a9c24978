"""The settings schema: `[tool.research-dispatch]` in pyproject.toml and the topic file's fields, as
pydantic models.

Everything here is input a user edits by hand, so every failure becomes one `BadInput` line naming the
file and the field (`records.first_error`). The topic files themselves (discovery, reading, the
cross-file checks, the per-topic defaults) are `config/topics.py`; the strict reading of their YAML
is `core/strictyaml.py`. Report paths are *computed* from the file name and the model slug; no path is
ever read from input.
"""

from __future__ import annotations

import difflib
import posixpath
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from research_dispatch.config import lineage as model_lineage
from research_dispatch.core import gitref
from research_dispatch.core.errors import BadInput, Problem
from research_dispatch.core.fsio import read_text_strict
from research_dispatch.core.records import ValidationProblems, validation_problems
from research_dispatch.core.retry import RetryPolicy
from research_dispatch.core.sanitize import strip_invisible

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

TOPIC_ID_RE = re.compile(r"^[a-z0-9](?:[a-z0-9-]|\.(?!\.))*$")
SLUG_PART = r"[a-z0-9][a-z0-9._-]*"
MODEL_SLUG_RE = re.compile(rf"^{SLUG_PART}/{SLUG_PART}$")
PROVIDER_SLUG_RE = re.compile(rf"^{SLUG_PART}(?:/{SLUG_PART})?$")

MAX_TOPIC_ID_LEN = 64
# `1e308`, `1.0e308` or `5E-3`: a number in YAML 1.2 and TOML, but text under YAML 1.1's float rule
# (PyYAML), which reads an exponent only after a dot and with a sign (`1.0e+308`, `5.0e-3`). Said as
# such, not as "expected a number, got str".
_YAML11_TEXT_NUMBER = re.compile(r"(?P<sign>[-+]?)(?P<int>\d+)(?:\.(?P<frac>\d*))?[eE](?P<esign>[-+]?)(?P<exp>\d+)")


def _yaml11_spelling(match: re.Match[str]) -> str:
    return f"{match['sign']}{match['int']}.{match['frac'] or '0'}e{match['esign'] or '+'}{match['exp']}"


class _Strict(BaseModel):
    """Base of every settings model: unknown keys, wrong types and non-finite numbers are errors.

    pydantic's lax mode would read `max_steps: true` as 1 and `max_cost_usd: "3"` as 3.0; in a file a
    person edits by hand those are mistakes to report, not values to guess. NaN and infinity are
    refused too (`.nan` in YAML, `nan` in TOML): every comparison with them is false, so no cap holds.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=True, allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _no_coercion(cls, value: Any, info: ValidationInfo) -> Any:
        field = cls.model_fields.get(info.field_name or "")
        annotation = field.annotation if field is not None else None
        number = _YAML11_TEXT_NUMBER.fullmatch(value.strip()) if isinstance(value, str) else None
        if annotation in (int, float) and number is not None:
            raise ValueError(f"{value.strip()!r} is read as text, not a number: YAML 1.1 (PyYAML) needs a dot and a "
                             f"signed exponent to read it as a number; write it as {_yaml11_spelling(number)}"[:200])
        if annotation in (int, float) and isinstance(value, bool | str):
            raise ValueError(f"expected a number, got {type(value).__name__} {value!r}"[:120])
        if annotation is bool and not isinstance(value, bool):
            raise ValueError(f"expected true or false, got {type(value).__name__}")
        return value


class WordBand(_Strict):
    """Target length of a report. The researcher asks for expansion or tightening outside it."""

    min: int = Field(2000, ge=100, le=20000)
    max: int = Field(2500, ge=100, le=20000)

    @model_validator(mode="after")
    def _ordered(self) -> WordBand:
        if self.min >= self.max:
            raise ValueError(f"min ({self.min}) must be below max ({self.max})")
        return self


# Below these a leg cannot do its work at all (a search, a read and a written report): the cap would
# end every leg before its first useful answer, so such a budget is refused rather than paid for.
MIN_LEG_MINUTES = 0.1  # six seconds: less than one model call takes
MIN_LEG_USD = 0.001  # a tenth of a cent: less than a few thousand tokens of any listed model


class Budget(_Strict):
    """Hard caps for one leg. Caps, not prompt hints: the loop stops when any is reached."""

    max_steps: int = Field(40, ge=1, le=400)
    max_cost_usd: float = Field(3.0, gt=0, le=500)
    timeout_minutes: float = Field(12.0, gt=0, le=360)

    @field_validator("max_cost_usd")
    @classmethod
    def _payable(cls, value: float) -> float:
        if value < MIN_LEG_USD:
            raise ValueError(f"{value:g} dollars cannot pay for any leg (at least {MIN_LEG_USD:g}: a search, a read "
                             "and a report take thousands of tokens)")
        return value

    @field_validator("timeout_minutes")
    @classmethod
    def _long_enough(cls, value: float) -> float:
        if value < MIN_LEG_MINUTES:
            raise ValueError(f"{value:g} minutes is shorter than any leg can take (at least {MIN_LEG_MINUTES:g}: one "
                             "model call alone takes seconds)")
        return value


SEARCH_PROVIDERS = ("tavily", "exa")
DEFAULT_PROVIDERS: tuple[str, ...] = ("tavily",)
MCP_NAME_RE = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,30}[a-z0-9])?$")
MCP_TOOL_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
ENV_REFERENCE_RE = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]{0,127})\}$")
MAX_TOOL_NAME = 64  # what OpenAI-compatible function names allow ([A-Za-z0-9_-]{1,64})


class SearchSettings(_Strict):
    max_results: int = Field(8, ge=1, le=20)
    depth: Literal["basic", "advanced"] = "advanced"
    include_domains: tuple[str, ...] = ()
    exclude_domains: tuple[str, ...] = ()
    # Which search indexes a leg queries; with several, results are merged into one S<n> registry.
    providers: tuple[Literal["tavily", "exa"], ...] = DEFAULT_PROVIDERS  # type: ignore[assignment]

    @field_validator("providers")
    @classmethod
    def _providers(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value:
            raise ValueError(f"at least one search provider ({', '.join(SEARCH_PROVIDERS)})")
        if len(set(value)) != len(value):
            raise ValueError("a provider is listed twice")
        return value

    @field_validator("include_domains", "exclude_domains")
    @classmethod
    def _domains(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for domain in value:
            if not re.fullmatch(r"[a-z0-9.-]+(?:/[\w./-]*)?", domain) or len(domain) > 253:
                raise ValueError(f"invalid domain {domain!r}")
        if len(value) > 100:
            raise ValueError("at most 100 domains")
        return tuple(sorted(set(value)))


class ModelRoute(_Strict):
    """One leg of a topic: which model writes it, why, and optionally which provider must serve it."""

    model: str
    rationale: str = Field("", max_length=500)
    provider: str | None = None

    @field_validator("model")
    @classmethod
    def _slug(cls, value: str) -> str:
        if ":" in value:
            raise ValueError(f"{value!r}: variant suffixes (':nitro', ':free', ...) change the serving pool; "
                             "use the plain slug so the route can be verified")
        if value.startswith("~") or not MODEL_SLUG_RE.fullmatch(value) or len(value) > 120:
            raise ValueError(f"{value!r} is not a concrete OpenRouter slug author/name (lower case)")
        if value.split("/", 1)[0] == "openrouter":
            raise ValueError(f"{value!r} is a router, not a model: its route cannot be verified")
        return value

    @field_validator("rationale")
    @classmethod
    def _rationale(cls, value: str) -> str:
        if strip_invisible(value) != value:
            raise ValueError("must not contain control, invisible or bidirectional characters")
        return value

    @field_validator("provider")
    @classmethod
    def _provider(cls, value: str | None) -> str | None:
        if value is not None and (not PROVIDER_SLUG_RE.fullmatch(value) or len(value) > 80):
            raise ValueError(f"{value!r} is not a provider slug (e.g. deepseek, deepinfra/turbo)")
        return value

    @property
    def author(self) -> str:
        return self.model.split("/", 1)[0]

    @property
    def name(self) -> str:
        return self.model.split("/", 1)[1]


class Topic(_Strict):
    """The FIXED topic file fields."""

    id: str = Field(min_length=1, max_length=MAX_TOPIC_ID_LEN)
    title: str = Field(min_length=1, max_length=200)
    scope: str = Field(min_length=1, max_length=8000)
    models: tuple[ModelRoute, ...] = Field(min_length=1, max_length=16)
    words: WordBand | None = None
    budget: Budget | None = None
    search: SearchSettings | None = None
    mcp: tuple[str, ...] = Field((), max_length=16)  # MCP servers (names of [tool.research-dispatch.mcp.servers])

    @field_validator("mcp")
    @classmethod
    def _mcp(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for name in value:
            if not isinstance(name, str) or not MCP_NAME_RE.fullmatch(name):
                raise ValueError(f"{name!r} is not an MCP server name ([a-z0-9-]+)")
        if len(set(value)) != len(value):
            raise ValueError("a server is listed twice")
        return value

    @field_validator("id")
    @classmethod
    def _id(cls, value: str) -> str:
        if not TOPIC_ID_RE.fullmatch(value) or value.endswith("."):
            raise ValueError(f"{value!r} must match [a-z0-9][a-z0-9.-]* (no '..', no trailing '.')")
        return value

    @field_validator("title")
    @classmethod
    def _title(cls, value: str) -> str:
        if any(ch in value for ch in "\r\n") or any(ord(ch) < 32 for ch in value):
            raise ValueError("must be one line without control characters")
        if strip_invisible(value) != value:  # the title reaches reports, commits and the PR body
            raise ValueError("must not contain invisible or bidirectional control characters")
        return value

    @field_validator("models")
    @classmethod
    def _unique_models(cls, value: tuple[ModelRoute, ...]) -> tuple[ModelRoute, ...]:
        seen: set[str] = set()
        for route in value:
            if route.model in seen:
                raise ValueError(f"model {route.model!r} is listed twice")
            seen.add(route.model)
        return value


class GatewaySettings(_Strict):
    """The model gateway. `kind` (FIXED, docs/ARCHITECTURE.md § Gateways): `openrouter` (the default: pinned routes,
    router metadata, `/generation` records) or `openai-compatible` (a local or self-hosted server such as
    LiteLLM, vLLM, llama.cpp or Ollama, reached with OPENAI_API_KEY/OPENAI_BASE_URL: it can only report
    which model answered, so its routes are `self_reported`, verified only with `trust_self_reported`)."""

    kind: Literal["openrouter", "openai-compatible"] = "openrouter"
    trust_self_reported: bool = False
    timeout_s: float = Field(180.0, gt=0, le=1800)
    max_retries: int = Field(3, ge=0, le=10)
    backoff_base_s: float = Field(1.0, ge=0, le=60)
    backoff_max_s: float = Field(30.0, ge=0, le=600)
    # The visible answer's output cap. A reasoning route gets room for reasoning on top (gateway/reasoning.py):
    # `reasoning_max_tokens` for the families that take a budget (Anthropic, Gemini, Qwen), else the share of
    # `reasoning_effort` (minimal 10%, low 20%, medium 50%, high 80% of the whole cap).
    max_completion_tokens: int = Field(8192, ge=256, le=200_000)
    reasoning_max_tokens: int = Field(2048, ge=1024, le=100_000)
    reasoning_effort: Literal["minimal", "low", "medium", "high"] = "low"
    # A Retry-After longer than this is not waited out: the call fails at once and says so.
    max_retry_after_s: float = Field(120.0, ge=0, le=3600)
    # How structured output (the synthesis' extraction and judging) is asked for: `auto` is `json_schema` on
    # OpenRouter and, on an openai-compatible server, each form in turn until the server takes one
    # (gateway/structured.py); or name the form the server takes.
    structured_output: Literal["auto", "json_schema", "json_object", "tool_call"] = "auto"
    # Prompt-cache breakpoints (`cache_control`) for the models that cache only where told (Anthropic; Gemini
    # explicitly): gateway/caching.py. Off: every prompt token of such a leg is billed at full input price.
    cache_breakpoints: bool = True
    referer: str = "https://github.com/research-dispatch/research-dispatch"
    title: str = "research-dispatch"

    def retry_policy(self, sleep: Callable[[float], None] = time.sleep) -> RetryPolicy:
        """The gateway's retries (`core/retry.py`): jittered back-off, a Retry-After up to `max_retry_after_s`."""
        return RetryPolicy(max_retries=self.max_retries, backoff_base_s=self.backoff_base_s,
                           backoff_max_s=self.backoff_max_s, max_wait_s=self.max_retry_after_s, sleep=sleep)


class SearchServiceSettings(_Strict):
    """The search API client (Tavily): the per-request timeout and the retry budget for 429, 5xx,
    timeouts and resets. Service knobs, not research inputs: they are not part of a leg's input hash."""

    timeout_s: float = Field(30.0, gt=0, le=300)
    max_retries: int = Field(2, ge=0, le=10)
    backoff_base_s: float = Field(1.0, ge=0, le=60)
    backoff_max_s: float = Field(8.0, ge=0, le=600)

    def retry_policy(self, sleep: Callable[[float], None] = time.sleep) -> RetryPolicy:
        """The search providers' retries (`core/retry.py`): plain back-off (their clients give no Retry-After)."""
        return RetryPolicy(max_retries=self.max_retries, backoff_base_s=self.backoff_base_s,
                           backoff_max_s=self.backoff_max_s, jitter=0.0, sleep=sleep)


# `host`, `host:port`, `[v6]`, `[v6]:port` or a bare IPv6 address (two colons at least, no port).
_ALLOWED_HOST = re.compile(r"(?:\[[0-9a-f:.]{2,45}\]|[a-z0-9.-]{1,253})(?::(?P<port>\d{1,5}))?|"
                           r"[0-9a-f.]*:[0-9a-f.]*:[0-9a-f:.]*")


Depth = Literal["basic", "advanced"]
Credits = Annotated[float, Field(ge=0, le=100)]


class SearchPriceSettings(_Strict):
    """`[tool.research-dispatch.search_prices]`: what the search services charge, so that a leg's search spend
    counts in its dollars and its dollar cap like its model calls (`tools/providers.py` prices each call).

    The defaults are the services' documented list prices: Tavily ("Credits & Pricing": pay-as-you-go $0.008
    a credit; a basic search 1 credit, an advanced one 2; every 5 successful URL extractions 1 credit at basic
    depth, 2 at advanced, a failed one free) and Exa (pricing page: a search $7 per 1,000 requests with up to
    10 results, $1 per 1,000 results beyond 10; contents $1 per 1,000 pages). A plan with cheaper credits
    sets its own `tavily_credit_usd`. Prices, not research inputs: not part of a leg's input hash."""

    tavily_credit_usd: float = Field(0.008, ge=0, le=1)
    tavily_search_credits: dict[Depth, Credits] = Field(default_factory=lambda: _documented_credits())
    tavily_extract_credits_per_5_urls: dict[Depth, Credits] = Field(default_factory=lambda: _documented_credits())
    exa_search_usd: float = Field(0.007, ge=0, le=10)
    exa_extra_result_usd: float = Field(0.001, ge=0, le=10)
    exa_page_usd: float = Field(0.001, ge=0, le=10)

    @field_validator("tavily_search_credits", "tavily_extract_credits_per_5_urls", mode="before")
    @classmethod
    def _whole_table(cls, value: object) -> object:
        """A table that names one depth keeps the documented price of the other."""
        if isinstance(value, dict):
            return {**_documented_credits(), **value}
        return value


def _documented_credits() -> dict[Depth, float]:
    """Tavily's credits at each depth, for a search or for five pages read alike."""
    return {"basic": 1.0, "advanced": 2.0}


class DestinationSettings(_Strict):
    """`[tool.research-dispatch.destinations]`: where a model may point a tool (`tools/destinations.py`).

    Loopback, private, link-local and metadata addresses (in any spelling a client decodes), local host
    names and schemes other than http(s) are refused before any tool call, in the egress proxy stdio MCP
    servers run behind, and never become sources; `allow_hosts` names the hosts that are let through
    anyway (an internal documentation server an MCP server should read): `host` allows its ports 80 and
    443, `host:port` (`[IPv6]:port`) that port only. Schemes and user names are refused for every host."""

    allow_hosts: tuple[str, ...] = Field((), max_length=100)

    @field_validator("allow_hosts")
    @classmethod
    def _hosts(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        hosts = []
        for host in value:
            plain = host.strip().lower()
            match = _ALLOWED_HOST.fullmatch(plain)
            port = match.group("port") if match else None
            if match is None or (port is not None and not 1 <= int(port) <= 65535):
                raise ValueError(f"{host[:100]!r} is not a host, host:port or [IPv6]:port (no scheme or path)")
            hosts.append(plain)
        return tuple(sorted(set(hosts)))


# What an MCP server started behind the egress proxy gets from it (and may not set in its `env`).
PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy", "no_proxy", "node_use_env_proxy")


class McpServerSettings(_Strict):
    """One MCP server (`[tool.research-dispatch.mcp.servers.<name>]`): how to reach it and what it may see.

    `command` (argv, no shell) runs it over stdio; `url` reaches it over streamable HTTP. `env` is the
    whole environment the process gets besides PATH and HOME: a value `${NAME}` is taken from the run's
    environment (the only way a key can reach a server). `tools` is the allow-list: the researcher sees
    no other tool of the server. `timeout_s` bounds starting it and every call; `max_result_bytes`
    caps one result. `egress_proxy` (stdio servers, on by default) starts it with HTTP_PROXY/HTTPS_PROXY
    naming the leg's checking proxy (`tools/egress.py`), which applies the destination policy to every
    request, redirect and name resolution of a server that honours those variables; off, the server's
    own requests, redirects and DNS are the runner's network's to police.
    """

    command: tuple[str, ...] | None = None
    url: str | None = None
    env: dict[str, str] = Field(default_factory=dict)
    tools: tuple[str, ...] = Field(min_length=1, max_length=32)
    timeout_s: float = Field(30.0, gt=0, le=600)
    max_result_bytes: int = Field(1_000_000, ge=1024, le=8 * 1024 * 1024)
    egress_proxy: bool = True

    @field_validator("command")
    @classmethod
    def _command(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if value is None:
            return value
        if not value or not value[0].strip():
            raise ValueError("must name the program to run (a list: program, then its arguments)")
        for part in value:
            if "\x00" in part or len(part) > 4096:
                raise ValueError("arguments must be plain strings (no NUL, at most 4096 characters)")
        return value

    @field_validator("url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is None:
            return value
        try:
            parts = urlsplit(value)
            host = parts.hostname or ""
        except ValueError:
            raise ValueError(f"{value[:100]!r} is not a URL") from None
        if parts.scheme not in ("http", "https") or not host:
            raise ValueError(f"{value[:100]!r} is not an http(s) URL")
        if parts.username is not None or parts.password is not None:
            raise ValueError("must not carry a user name or password")
        loopback = host in ("localhost", "127.0.0.1", "::1") or host.startswith("127.")
        if parts.scheme == "http" and not loopback:
            raise ValueError("plain http is allowed only to a loopback address; use https")
        return value

    @field_validator("env")
    @classmethod
    def _env(cls, value: dict[str, str]) -> dict[str, str]:
        for name, item in value.items():
            if not ENV_NAME_RE.fullmatch(name):
                raise ValueError(f"{name!r} is not an environment variable name")
            if not isinstance(item, str) or "\x00" in item:
                raise ValueError(f"{name}: the value must be a string")
            if item.startswith("${") and not ENV_REFERENCE_RE.fullmatch(item):
                raise ValueError(f"{name}: {item[:60]!r} must be exactly ${{VARIABLE}} to pass a variable through")
        return value

    @field_validator("tools")
    @classmethod
    def _tools(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for name in value:
            if not MCP_TOOL_RE.fullmatch(name):
                raise ValueError(f"{name!r} is not a tool name ([A-Za-z0-9_-], at most 64 characters)")
        if len(set(value)) != len(value):
            raise ValueError("a tool is listed twice")
        return value

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerSettings:
        if (self.command is None) == (self.url is None):
            raise ValueError("give exactly one of command (stdio) or url (streamable HTTP)")
        if self.url is not None and self.env:
            raise ValueError("env applies to a command (stdio) server only")
        proxies = sorted(name for name in self.env if name.lower() in PROXY_VARIABLES)
        if self.command is not None and self.egress_proxy and proxies:
            raise ValueError(f"env sets {proxies[0]}, which the egress proxy sets; set egress_proxy = false to use "
                             "a proxy of your own")
        return self


class McpSettings(_Strict):
    """`[tool.research-dispatch.mcp]`: the MCP servers a topic may name in its `mcp:` list."""

    servers: dict[str, McpServerSettings] = Field(default_factory=dict)

    @field_validator("servers")
    @classmethod
    def _names(cls, value: dict[str, McpServerSettings]) -> dict[str, McpServerSettings]:
        for name, server in value.items():
            if not MCP_NAME_RE.fullmatch(name):
                raise ValueError(f"{name!r} is not a server name ([a-z0-9-]+, at most 32 characters)")
            too_long = [t for t in server.tools if len(f"{name}__{t}") > MAX_TOOL_NAME]
            if too_long:
                raise ValueError(f"{name}__{too_long[0]} is longer than {MAX_TOOL_NAME} characters, the limit "
                                 "for a tool name the model sees")
        return value


class SynthesisSettings(_Strict):
    """The synthesis stage: who extracts and who judges, and how claims are batched.

    `batch_size` is the number of claims one judge call aligns (a few anchor claims repeated from the
    previous batch ride along), so judge calls grow with claims / batch_size. `concurrency` bounds the
    gateway calls in flight. `layers` is an optional vocabulary of layer names the extractor is asked
    to reuse, so that independent reports file the same decision under the same layer.
    `citation_models` are the judges that check a report's citations against its evidence: the first
    whose family did not write the report checks it (empty: the `judge_models`), so a cheaper model can
    do this per-citation work.
    `timeout_minutes` bounds the whole stage's wall time: what is not done by then is named in the
    synthesis (see `synthesis.pipeline`). `count_unsupported` lets an anchored claim count without a
    citation a judge of another family confirmed (`synthesis.count.counting`; off by default).
    """

    extractor_model: str = "openai/gpt-5-mini"
    judge_models: tuple[str, ...] = ("anthropic/claude-sonnet-4.6", "openai/gpt-5-mini")
    citation_models: tuple[str, ...] = ()
    count_unverified: bool = False
    count_unsupported: bool = False
    batch_size: int = Field(40, ge=2, le=400)
    similarity_threshold: float = Field(0.2, ge=0.0, le=1.0)
    concurrency: int = Field(8, ge=1, le=64)
    layers: tuple[str, ...] = ()
    timeout_minutes: float = Field(default=30.0, gt=0, le=24 * 60)

    @field_validator("layers")
    @classmethod
    def _layers(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if len(value) > 100:
            raise ValueError("at most 100 layer names")
        for layer in value:
            if not layer.strip() or len(layer) > 80 or any(ord(ch) < 32 for ch in layer):
                raise ValueError(f"{layer!r} must be a short one-line layer name")
        return tuple(dict.fromkeys(v.strip() for v in value))

    @field_validator("extractor_model")
    @classmethod
    def _extractor(cls, value: str) -> str:
        return ModelRoute._slug(value)

    @field_validator("judge_models")
    @classmethod
    def _judges(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value:
            raise ValueError("at least one judge model")
        return tuple(ModelRoute._slug(v) for v in value)

    @field_validator("citation_models")
    @classmethod
    def _citation_judges(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(ModelRoute._slug(v) for v in value)


class PRSettings(_Strict):
    """Publishing: the refresh branch, the PR, the bot identity and the GitHub API retry budget.

    `bot_email` is also how the publisher recognises its own commits: a commit on the refresh branch
    by anyone else means a human edited it, and the bot then comments instead of rewriting the branch.
    """

    base: str = "main"
    labels: tuple[str, ...] = ("research-refresh", "automated")
    branch_prefix: str = "research-refresh/"
    reviewers: tuple[str, ...] = ()
    remote: str = "origin"
    bot_name: str = Field("research-dispatch[bot]", min_length=1, max_length=100)
    bot_email: str = Field("research-dispatch[bot]@users.noreply.github.com", min_length=3, max_length=200)
    api_timeout_s: int = Field(30, ge=1, le=600)
    api_retries: int = Field(3, ge=0, le=10)
    api_backoff_s: float = Field(2.0, ge=0, le=120)
    api_max_wait_s: float = Field(90.0, ge=0, le=3600)

    def retry_policy(self, sleep: Callable[[float], None] = time.sleep) -> RetryPolicy:
        """The GitHub API's retries (`core/retry.py`): back-off from `api_backoff_s` up to `api_max_wait_s`,
        and GitHub's Retry-After or rate-limit reset waited when it is no longer than `api_max_wait_s`."""
        return RetryPolicy(max_retries=self.api_retries, backoff_base_s=self.api_backoff_s,
                           backoff_max_s=self.api_max_wait_s, max_wait_s=self.api_max_wait_s, jitter=0.0, sleep=sleep)

    @field_validator("base")
    @classmethod
    def _base(cls, value: str) -> str:
        if not gitref.valid_branch_name(value):
            raise ValueError(f"{value!r} is not {gitref.RULE}")
        return value

    @field_validator("branch_prefix")
    @classmethod
    def _branch_prefix(cls, value: str) -> str:
        """Checked as the branch of a cycle (`<prefix>2026-H1`); `config/plan.refresh_branch` checks the
        branch of the cycle a command runs again, whole."""
        if not gitref.valid_branch_name(f"{value}2026-H1"):
            raise ValueError(f"{value!r} followed by a cycle id (e.g. {value}2026-H1) is not {gitref.RULE}")
        return value

    @field_validator("remote")
    @classmethod
    def _remote(cls, value: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", value):
            raise ValueError(f"{value!r} is not a git remote name")
        return value

    @field_validator("bot_name")
    @classmethod
    def _bot_name(cls, value: str) -> str:
        if any(ch in value for ch in "<>\n\r") or any(ord(ch) < 32 for ch in value):
            raise ValueError("must be one line without '<' or '>'")
        return value

    @field_validator("bot_email")
    @classmethod
    def _bot_email(cls, value: str) -> str:
        if not re.fullmatch(r"[^\s<>@]+@[^\s<>@]+", value):
            raise ValueError(f"{value!r} is not an e-mail address")
        return value

    @field_validator("labels")
    @classmethod
    def _labels(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for label in value:
            if not label.strip() or len(label) > 50 or any(ord(ch) < 32 for ch in label):
                raise ValueError(f"{label!r} is not a label name (1–50 printable characters)")
        return value


def _relative_dir(value: str) -> str:
    """A repository-relative directory (or file) path in one canonical spelling.

    `research/`, `./research` and `research//` all mean `research`, and are stored so: every computed
    path (`research/<stem>.md`) is then a path git accepts (`research//x.md` is not). The top level
    itself, `.git` and anything outside the repository are refused: reports written there could never
    be committed, or would land in git's own files."""
    if not value or "\\" in value or value.startswith("/") or Path(value).is_absolute():
        raise ValueError(f"{value!r} must be a relative path inside the repository, with '/' between parts")
    parts = PurePosixPath(value).parts
    if ".." in parts:
        raise ValueError(f"{value!r} must be a relative path inside the repository")
    if any(part.lower() == ".git" for part in parts):
        raise ValueError(f"{value!r} is inside .git, where git keeps its own files")
    normal = posixpath.normpath(value)
    if normal == ".":
        raise ValueError(f"{value!r} is the repository's top level; give a directory inside it (e.g. research)")
    return normal


class Settings(_Strict):
    """`[tool.research-dispatch]`. Every key has a default: a repository with only topics/ works."""

    topics_dir: str = "topics"
    research_dir: str = "research"
    framework_dir: str = "framework"
    framework_name: str = "synthesis"
    methodology_path: str = "docs/METHODOLOGY.md"
    build_dir: str = "build"
    words: WordBand = WordBand()
    budget: Budget = Budget()
    search: SearchSettings = SearchSettings()
    run_budget_usd: float = Field(50.0, gt=0, le=10_000)
    jobs: int = Field(4, ge=1, le=64)
    families: dict[str, str] = Field(default_factory=dict)
    lineage: dict[str, str] = Field(default_factory=dict)
    gateway: GatewaySettings = GatewaySettings()
    search_service: SearchServiceSettings = SearchServiceSettings()
    search_prices: SearchPriceSettings = SearchPriceSettings()
    mcp: McpSettings = McpSettings()
    destinations: DestinationSettings = DestinationSettings()
    synthesis: SynthesisSettings = SynthesisSettings()
    pr: PRSettings = PRSettings()

    @field_validator("topics_dir", "research_dir", "framework_dir", "methodology_path", "build_dir")
    @classmethod
    def _dirs(cls, value: str, info: ValidationInfo) -> str:
        """Each directory has one role: reports, synthesis, build files and topics never share one (a
        report directory holding the synthesis would be read as reports; a build directory inside it
        would be committed). Fields validate in order, so each is compared with the ones before it."""
        value = _relative_dir(value)
        if info.field_name == "methodology_path":
            return value
        for other in ("topics_dir", "research_dir", "framework_dir", "build_dir"):
            if other == info.field_name:
                break
            known = info.data.get(other)
            if isinstance(known, str) and (value == known or value.startswith(known + "/")
                                           or known.startswith(value + "/")):
                raise ValueError(f"{value!r} overlaps {other} {known!r}; give each its own directory")
        return value

    @field_validator("framework_name")
    @classmethod
    def _framework_name(cls, value: str) -> str:
        if not re.fullmatch(r"[a-z0-9][a-z0-9._-]*", value) or ".." in value:
            raise ValueError(f"{value!r} must be a plain file name stem")
        return value

    @field_validator("lineage")
    @classmethod
    def _lineage(cls, value: dict[str, str]) -> dict[str, str]:
        for model, family in value.items():
            if not MODEL_SLUG_RE.fullmatch(model.split(":", 1)[0]):
                raise ValueError(f"{model!r} is not a model slug (author/name)")
            if not re.fullmatch(SLUG_PART, family) or "/" in family:
                raise ValueError(f"{family!r} (for {model}) is not a family name (a slug author such as deepseek)")
        return value

    def family_of(self, model_slug: str) -> str:
        """The family a model counts under (`config.lineage`): `lineage`, the built-in table of derived
        models, then `families` (slug author → family), then the slug's author."""
        return model_lineage.family_of(model_slug, lineage=self.lineage, families=self.families)

    def unknown_author(self, model_slug: str) -> str | None:
        """The model's author when no lineage table or `families` entry knows it (it then counts as its own
        family, which may hide that it is derived from another family's model), else None."""
        return model_lineage.unknown_author(model_slug, lineage=self.lineage, families=self.families)

    @property
    def document_relpath(self) -> str:
        return f"{self.framework_dir}/{self.framework_name}.md"

    @property
    def ledger_relpath(self) -> str:
        return f"{self.framework_dir}/claims.json"

    @property
    def synthesis_calls_relpath(self) -> str:
        return f"{self.framework_dir}/synthesis.calls.jsonl"

    def synthesis_relpaths(self) -> list[str]:
        """Every computed path the synthesis writes: document, ledger, its call log, the methodology."""
        return [self.document_relpath, self.ledger_relpath, self.synthesis_calls_relpath, self.methodology_path]


# --------------------------------------------------------------------------------------------------
# pyproject settings

CONFIG_FILE = "pyproject.toml"
TABLE = "research-dispatch"
MAX_CONFIG_BYTES = 1024 * 1024
NEAR_TABLE = 0.8
"""How alike a `[tool.*]` table name must be to ours (difflib's ratio, after normalising) to be named as a
probable misspelling (`[tool.research-dispatcher]`, `[tool.reserch-dispatch]`)."""


@dataclass(frozen=True)
class SettingsCheck:
    """`check`'s reading of the configuration: every problem and warning, and the settings that are valid.

    Why the settings despite the problems: `check` lists every problem at once, and the topic files are
    checked with what the configuration does say (its `topics_dir`, `families`, judges), so a mistake in
    pyproject.toml does not hide the topics' own (issue 30.2). Each key that is wrong is left at its
    default here; nothing else reads these settings."""

    settings: Settings
    problems: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)


def _normalised(name: str) -> str:
    """A table name as Python packaging compares names: case, `_` and `.` do not matter."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _tables(prefix: str, value: Any) -> list[str]:
    """The TOML table headers a user wrote under `prefix` (`tool.research_dispatch.pr`), for naming them."""
    if not isinstance(value, dict):
        return [prefix]
    nested = [key for key, item in value.items() if isinstance(item, dict)]
    if nested and len(nested) == len(value):
        return [table for key in nested for table in _tables(f"{prefix}.{key}", value[key])]
    return [prefix]


def misplaced_tables(tool: Any) -> tuple[list[Problem], list[Problem]]:
    """`[tool.*]` tables that look like ours but are not read: (problems, warnings).

    A table whose name is ours once case, `_` and `.` are ignored (`[tool.research_dispatch.pr]`) is a
    problem: no other tool can own that name, and everything in it would silently not apply (a refresh
    PR against the wrong base, a judge that is not the one chosen). A name that is merely close
    (`[tool.research-dispatcher]`) is a warning with the did-you-mean: it may be another tool's."""
    problems: list[Problem] = []
    warnings: list[Problem] = []
    if not isinstance(tool, dict):
        return problems, warnings
    for name, value in tool.items():
        if name == TABLE:
            continue
        exact = _normalised(name) == TABLE
        if not exact and difflib.SequenceMatcher(None, _normalised(name), TABLE).ratio() < NEAR_TABLE:
            continue
        for table in _tables(f"tool.{name}", value):
            ours = "tool." + TABLE + table[len(f"tool.{name}"):]
            if exact:
                problems.append(Problem(CONFIG_FILE, table, f"is not read: research-dispatch reads [{ours}] (with a "
                                        "hyphen); rename the table"))
            else:
                warnings.append(Problem(CONFIG_FILE, table,
                                        f"is not read by research-dispatch; did you mean [{ours}]?"))
    return problems, warnings


def _read_config(repo: Path) -> dict[str, Any] | None:
    """pyproject.toml as TOML (None when there is none); unreadable or invalid TOML is `BadInput`."""
    path = repo / CONFIG_FILE
    if not path.exists():
        return None
    text = read_text_strict(path, display=CONFIG_FILE, max_bytes=MAX_CONFIG_BYTES)
    try:
        data: dict[str, Any] = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise BadInput(f"invalid TOML: {exc}", path=CONFIG_FILE) from None
    return data


def _table_of(data: dict[str, Any]) -> dict[str, Any]:
    tool = data.get("tool", {})
    table = tool.get(TABLE, {}) if isinstance(tool, dict) else {}
    if not isinstance(table, dict):
        raise BadInput("must be a table", path=CONFIG_FILE, field=f"tool.{TABLE}")
    return table


def _validate(table: dict[str, Any]) -> Settings:
    try:
        return Settings.model_validate(table)
    except ValidationError as exc:
        raise ValidationProblems(CONFIG_FILE, validation_problems(exc, Settings), prefix=f"tool.{TABLE}.") from None


def load_settings(repo: Path) -> Settings:
    """Read `[tool.research-dispatch]` from repo/pyproject.toml; a missing file or table means defaults.
    The first thing wrong is `BadInput` (exit 2), a misspelt table of ours included (`misplaced_tables`)."""
    data = _read_config(repo)
    if data is None:
        return Settings()
    problems, _ = misplaced_tables(data.get("tool"))
    if problems:
        raise BadInput(problems[0].message, path=problems[0].file, field=problems[0].field)
    return _validate(_table_of(data))


def check_settings(repo: Path) -> SettingsCheck:
    """Every problem and warning of the configuration, and its valid part (`SettingsCheck`)."""
    try:
        data = _read_config(repo)
        if data is None:
            return SettingsCheck(Settings())
        problems, warnings = misplaced_tables(data.get("tool"))
        table = dict(_table_of(data))
    except BadInput as exc:
        return SettingsCheck(Settings(), exc.problems())
    try:
        return SettingsCheck(_validate(table), problems, warnings)
    except ValidationProblems as exc:
        problems += exc.problems()
    while table:  # the valid part: drop the keys that hold an error (each round drops at least one)
        try:
            return SettingsCheck(Settings.model_validate(table), problems, warnings)
        except ValidationError as exc:
            wrong = {str(err["loc"][0]) for err in exc.errors() if err["loc"]}
            table = {key: value for key, value in table.items() if key not in wrong} if wrong else {}
    return SettingsCheck(Settings(), problems, warnings)
