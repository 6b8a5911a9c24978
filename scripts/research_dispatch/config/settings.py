"""Configuration (`[tool.research-dispatch]` in pyproject.toml) and topic files, as pydantic models.

Everything here is input a user edits by hand, so every failure becomes one `BadInput` line naming the
file and the field. Topic YAML is parsed defensively: no anchors or aliases (alias bombs), no
duplicate keys, bounded size and nesting, strict UTF-8. Report paths are *computed* from the file
name and the model slug; no path is ever read from input.
"""

from __future__ import annotations

import os
import re
import stat
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from research_dispatch.config import lineage as model_lineage
from research_dispatch.core.errors import BadInput
from research_dispatch.core.sanitize import strip_invisible

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

TOPIC_ID_RE = re.compile(r"^[a-z0-9](?:[a-z0-9-]|\.(?!\.))*$")
SLUG_PART = r"[a-z0-9][a-z0-9._-]*"
MODEL_SLUG_RE = re.compile(rf"^{SLUG_PART}/{SLUG_PART}$")
PROVIDER_SLUG_RE = re.compile(rf"^{SLUG_PART}(?:/{SLUG_PART})?$")
TOPIC_FILE_RE = re.compile(r"^(?P<nn>\d{2})-(?P<id>[a-z0-9][a-z0-9.-]*)\.ya?ml$")

MAX_TOPIC_BYTES = 64 * 1024
MAX_YAML_DEPTH = 12
MAX_TOPIC_ID_LEN = 64


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


class Budget(_Strict):
    """Hard caps for one leg. Caps, not prompt hints: the loop stops when any is reached."""

    max_steps: int = Field(40, ge=1, le=400)
    max_cost_usd: float = Field(3.0, gt=0, le=500)
    timeout_minutes: float = Field(12.0, gt=0, le=360)


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
    """The model gateway. `kind` (FIXED, DESIGN.md § Gateways): `openrouter` (the default: pinned routes,
    router metadata, `/generation` records) or `openai-compatible` (a local or self-hosted server such as
    LiteLLM, vLLM, llama.cpp or Ollama, reached with OPENAI_API_KEY/OPENAI_BASE_URL: it can only report
    which model answered, so its routes are `self_reported`, verified only with `trust_self_reported`)."""

    kind: Literal["openrouter", "openai-compatible"] = "openrouter"
    trust_self_reported: bool = False
    timeout_s: float = Field(180.0, gt=0, le=1800)
    max_retries: int = Field(3, ge=0, le=10)
    backoff_base_s: float = Field(1.0, ge=0, le=60)
    backoff_max_s: float = Field(30.0, ge=0, le=600)
    max_completion_tokens: int = Field(8192, ge=256, le=200_000)
    # A Retry-After longer than this is not waited out: the call fails at once and says so.
    max_retry_after_s: float = Field(120.0, ge=0, le=3600)
    referer: str = "https://github.com/research-dispatch/research-dispatch"
    title: str = "research-dispatch"


class SearchServiceSettings(_Strict):
    """The search API client (Tavily): the per-request timeout and the retry budget for 429, 5xx,
    timeouts and resets. Service knobs, not research inputs: they are not part of a leg's input hash."""

    timeout_s: float = Field(30.0, gt=0, le=300)
    max_retries: int = Field(2, ge=0, le=10)
    backoff_base_s: float = Field(1.0, ge=0, le=60)
    backoff_max_s: float = Field(8.0, ge=0, le=600)


class McpServerSettings(_Strict):
    """One MCP server (`[tool.research-dispatch.mcp.servers.<name>]`): how to reach it and what it may see.

    `command` (argv, no shell) runs it over stdio; `url` reaches it over streamable HTTP. `env` is the
    whole environment the process gets besides PATH and HOME: a value `${NAME}` is taken from the run's
    environment (the only way a key can reach a server). `tools` is the allow-list: the researcher sees
    no other tool of the server. `timeout_s` bounds starting it and every call; `max_result_bytes`
    caps one result.
    """

    command: tuple[str, ...] | None = None
    url: str | None = None
    env: dict[str, str] = Field(default_factory=dict)
    tools: tuple[str, ...] = Field(min_length=1, max_length=32)
    timeout_s: float = Field(30.0, gt=0, le=600)
    max_result_bytes: int = Field(1_000_000, ge=1024, le=8 * 1024 * 1024)

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
        from urllib.parse import urlsplit

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
    `timeout_minutes` bounds the whole stage's wall time: what is not done by then is named in the
    synthesis (see `synthesis.pipeline`).
    """

    extractor_model: str = "openai/gpt-5-mini"
    judge_models: tuple[str, ...] = ("anthropic/claude-sonnet-4.6", "openai/gpt-5-mini")
    count_unverified: bool = False
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

    @field_validator("branch_prefix", "base")
    @classmethod
    def _ref(cls, value: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._/-]*", value) or ".." in value or value.endswith(".lock"):
            raise ValueError(f"{value!r} is not a safe git ref name")
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
    path = Path(value)
    if not value or path.is_absolute() or ".." in path.parts:
        raise ValueError(f"{value!r} must be a relative path inside the repository")
    return value


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
    mcp: McpSettings = McpSettings()
    synthesis: SynthesisSettings = SynthesisSettings()
    pr: PRSettings = PRSettings()

    @field_validator("topics_dir", "research_dir", "framework_dir", "methodology_path", "build_dir")
    @classmethod
    def _dirs(cls, value: str) -> str:
        return _relative_dir(value)

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
# Safe YAML


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that rejects aliases, duplicate keys and deep nesting."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()  # type: ignore[no-untyped-call]
            raise yaml.constructor.ConstructorError(
                None, None, "YAML aliases/anchors are not allowed (they can expand without bound)", event.start_mark)
        event = self.peek_event()  # type: ignore[no-untyped-call]
        if getattr(event, "anchor", None):
            raise yaml.constructor.ConstructorError(
                None, None, "YAML anchors are not allowed (aliases to them can expand without bound)", event.start_mark)
        depth = getattr(self, "_depth", 0)
        if depth > MAX_YAML_DEPTH:
            raise yaml.constructor.ConstructorError(
                None, None, f"nesting deeper than {MAX_YAML_DEPTH} levels", event.start_mark)
        self._depth = depth + 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth = depth

    def construct_mapping(self, node: Any, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if not isinstance(key, str):
                raise yaml.constructor.ConstructorError(
                    None, None, f"mapping keys must be strings, got {key!r}", key_node.start_mark)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


_STR_TAG = "tag:yaml.org,2002:str"


def _refuse(problem: str, mark: Any) -> yaml.constructor.ConstructorError:
    return yaml.constructor.ConstructorError(None, None, problem, mark)


def _check_events(text: str) -> None:
    """The rules of `_StrictLoader`, checked on libyaml's event stream (C speed): no aliases or anchors,
    at most `MAX_YAML_DEPTH` levels, mapping keys that are unique strings. Raises the first problem, with
    its position; alias, anchor and depth problems before key problems, as `_StrictLoader` reports them.

    Why: every report, ledger and topic read goes through here, and the pure-Python parser costs ~0.1 ms
    a node (a report's front matter is ~170 nodes); a refresh reads each report several times.
    """
    loader = yaml.CSafeLoader(text)
    frames: list[list[Any]] = []  # per open collection: [is_mapping, expecting_key, keys seen]
    key_problem: yaml.constructor.ConstructorError | None = None
    try:
        while loader.check_event():
            event: Any = loader.get_event()
            if isinstance(event, yaml.AliasEvent):
                raise _refuse("YAML aliases/anchors are not allowed (they can expand without bound)", event.start_mark)
            if isinstance(event, (yaml.CollectionEndEvent, yaml.StreamStartEvent, yaml.StreamEndEvent,
                                  yaml.DocumentStartEvent, yaml.DocumentEndEvent)):
                if isinstance(event, yaml.CollectionEndEvent):
                    frames.pop()
                    if frames and frames[-1][0]:
                        frames[-1][1] = not frames[-1][1]
                continue
            if getattr(event, "anchor", None):
                raise _refuse("YAML anchors are not allowed (aliases to them can expand without bound)",
                              event.start_mark)
            if len(frames) > MAX_YAML_DEPTH:
                raise _refuse(f"nesting deeper than {MAX_YAML_DEPTH} levels", event.start_mark)
            parent = frames[-1] if frames else None
            if parent is not None and parent[0] and parent[1] and key_problem is None:
                key_problem = _key_problem(loader, event, parent[2])
            if isinstance(event, yaml.ScalarEvent):
                if parent is not None and parent[0]:
                    parent[1] = not parent[1]
            else:  # a sequence or mapping starts
                frames.append([isinstance(event, yaml.MappingStartEvent), True, set()])
    except yaml.MarkedYAMLError as exc:  # libyaml's own cap (1,000 levels) met before our events were seen
        if "maximum nesting depth" in str(exc.problem):
            raise _refuse(f"nesting deeper than {MAX_YAML_DEPTH} levels", exc.problem_mark) from None
        raise
    finally:
        loader.dispose()
    if key_problem is not None:
        raise key_problem


def _key_problem(loader: Any, event: Any, seen: set[str]) -> yaml.constructor.ConstructorError | None:
    """Why this mapping key is refused (not a string, or a duplicate), or None; records the key."""
    if not isinstance(event, yaml.ScalarEvent):
        return _refuse("mapping keys must be strings, got a collection", event.start_mark)
    tag = event.tag if event.tag not in (None, "!") else loader.resolve(yaml.ScalarNode, event.value, event.implicit)
    if tag != _STR_TAG:
        key = loader.construct_object(yaml.ScalarNode(tag, event.value))
        return _refuse(f"mapping keys must be strings, got {key!r}", event.start_mark)
    if event.value in seen:
        return _refuse(f"duplicate key {event.value!r}", event.start_mark)
    seen.add(event.value)
    return None


def _load_documents(text: str) -> list[Any]:
    """Every document of `text`, strictly: libyaml when PyYAML was built with it, else `_StrictLoader`."""
    if getattr(yaml, "__with_libyaml__", False):
        _check_events(text)
        return list(yaml.load_all(text, Loader=yaml.CSafeLoader))
    return list(yaml.load_all(text, Loader=_StrictLoader))


def load_yaml_text(text: str, *, path: str) -> Any:
    """Parse one YAML document strictly; every failure is a one-line BadInput naming `path`."""
    try:
        documents = _load_documents(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = exc.problem or exc.context or "invalid YAML"
        raise BadInput(f"{problem}{where}", path=path) from None
    except yaml.YAMLError as exc:
        raise BadInput(f"invalid YAML: {str(exc).splitlines()[0]}", path=path) from None
    except RecursionError:
        raise BadInput("YAML nesting too deep", path=path) from None
    if len(documents) != 1:
        raise BadInput("expected exactly one YAML document", path=path)
    return documents[0]


def read_text_strict(path: Path, *, display: str, max_bytes: int) -> str:
    """Read a small UTF-8 text file, refusing huge, binary or non-UTF-8 input, and anything that is not
    a regular file: a FIFO would block for ever, `/dev/zero` never ends, a directory is not text.

    The file is opened non-blocking and checked with `fstat` on the open descriptor, so the check and
    the read concern the same file; at most `max_bytes + 1` bytes are ever read.
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise BadInput(f"cannot read: {exc.strerror}", path=display) from None
    info = os.fstat(fd)
    problem = ("is a directory, not a file" if stat.S_ISDIR(info.st_mode)
               else "is not a regular file (a FIFO, socket or device)" if not stat.S_ISREG(info.st_mode)
               else f"file is {info.st_size} bytes; the limit is {max_bytes}" if info.st_size > max_bytes
               else None)
    if problem:
        os.close(fd)
        raise BadInput(problem, path=display)
    with os.fdopen(fd, "rb") as handle:
        try:
            raw = handle.read(max_bytes + 1)
        except OSError as exc:
            raise BadInput(f"cannot read: {exc.strerror}", path=display) from None
    if len(raw) > max_bytes:
        raise BadInput(f"file is larger than the limit of {max_bytes} bytes", path=display)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadInput(f"not valid UTF-8 (byte {exc.start})", path=display) from None
    if "\x00" in text:
        raise BadInput("contains NUL bytes", path=display)
    if not text.strip():
        raise BadInput("file is empty", path=display)
    return text.lstrip("\ufeff")


def _first_error(exc: ValidationError) -> tuple[str, str]:
    """The first pydantic error as (dotted field path, message) for a one-line report."""
    err = exc.errors()[0]
    parts: list[str] = []
    for loc in err["loc"]:
        if isinstance(loc, int):
            parts[-1:] = [f"{parts[-1] if parts else ''}[{loc}]"]
        else:
            parts.append(str(loc))
    field = ".".join(parts) or "(root)"
    message = err["msg"]
    if err["type"] == "extra_forbidden":
        message = "unknown key"
    elif err["type"] == "missing":
        message = "required key is missing"
    message = message.removeprefix("Value error, ")
    return field, message


# --------------------------------------------------------------------------------------------------
# Topic files


@dataclass(frozen=True)
class TopicFile:
    """A validated topic with where it came from and the file stem reports are named after."""

    topic: Topic
    path: Path  # absolute
    relpath: str  # as shown to users, e.g. topics/02-diloco-family.yaml
    nn: str
    raw_sha256: str

    @property
    def stem(self) -> str:
        return f"{self.nn}-{self.topic.id}"

    def report_stem(self, route: ModelRoute) -> str:
        """Computed report stem: NN-id, or NN-id.author-name when the topic has several models."""
        if len(self.topic.models) == 1:
            return self.stem
        return f"{self.stem}.{route.author}-{route.name}"


def load_topic_file(path: Path, *, repo: Path) -> TopicFile:
    import hashlib

    display = _display(path, repo)
    match = TOPIC_FILE_RE.fullmatch(path.name)
    if not match:
        raise BadInput("file name must be NN-<id>.yaml (two digits, a dash, the topic id)", path=display)
    try:
        path.resolve().relative_to(repo.resolve())
    except (ValueError, OSError, RuntimeError):
        raise BadInput("resolves outside the repository (a symlink?); topic files must live in it",
                       path=display) from None
    text = read_text_strict(path, display=display, max_bytes=MAX_TOPIC_BYTES)
    data = load_yaml_text(text, path=display)
    if not isinstance(data, dict):
        raise BadInput(f"expected a mapping at the top level, got {type(data).__name__}", path=display)
    try:
        topic = Topic.model_validate(data)
    except ValidationError as exc:
        field, message = _first_error(exc)
        raise BadInput(message, path=display, field=field) from None
    if topic.id != match.group("id"):
        raise BadInput(f"id {topic.id!r} does not match the file name ({match.group('id')!r})",
                       path=display, field="id")
    return TopicFile(topic=topic, path=path.resolve(), relpath=display, nn=match.group("nn"),
                     raw_sha256=hashlib.sha256(text.encode("utf-8")).hexdigest())


def _display(path: Path, repo: Path) -> str:
    """The path as the user knows it: relative to the repository, without following a final symlink
    (an error about `topics/01-x.yaml` must not print where that link points)."""
    try:
        return path.absolute().relative_to(repo.absolute()).as_posix()
    except ValueError:
        pass
    try:
        return (path.parent.resolve() / path.name).relative_to(repo.resolve()).as_posix()
    except (ValueError, OSError, RuntimeError):
        return path.as_posix()


def topic_paths(repo: Path, settings: Settings) -> list[Path]:
    directory = repo / settings.topics_dir
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.iterdir() if p.suffix in (".yaml", ".yml") and not p.name.startswith("."))


def load_topics(repo: Path, settings: Settings) -> list[TopicFile]:
    """Load every topic; raise the first problem. Use `check_topics` to collect all of them."""
    topics, problems = check_topics(repo, settings)
    if problems:
        raise problems[0]
    return topics


def check_topics(repo: Path, settings: Settings) -> tuple[list[TopicFile], list[BadInput]]:
    """Load all topic files, collecting one problem per bad file plus cross-file conflicts."""
    topics: list[TopicFile] = []
    problems: list[BadInput] = []
    paths = topic_paths(repo, settings)
    if not paths:
        problems.append(BadInput("no topic files (expected NN-<id>.yaml files)",
                                 path=settings.topics_dir + "/"))
    for path in paths:
        try:
            topics.append(load_topic_file(path, repo=repo))
        except BadInput as exc:
            problems.append(exc)
    by_id: dict[str, TopicFile] = {}
    for topic_file in topics:
        other = by_id.get(topic_file.topic.id)
        if other is not None:
            problems.append(BadInput(f"duplicate topic id {topic_file.topic.id!r} (also in {other.relpath})",
                                     path=topic_file.relpath, field="id"))
        else:
            by_id[topic_file.topic.id] = topic_file
    unique = [t for t in topics if by_id.get(t.topic.id) is t]
    for topic_file in unique:
        for index, name in enumerate(topic_file.topic.mcp):
            if name not in settings.mcp.servers:
                known = ", ".join(sorted(settings.mcp.servers)) or "none are configured"
                problems.append(BadInput(f"unknown MCP server {name!r} (configured in [tool.research-dispatch.mcp."
                                         f"servers]: {known})", path=topic_file.relpath, field=f"mcp[{index}]"))
    return unique, problems


# --------------------------------------------------------------------------------------------------
# pyproject settings


def load_settings(repo: Path) -> Settings:
    """Read `[tool.research-dispatch]` from repo/pyproject.toml; a missing file or table means defaults."""
    path = repo / "pyproject.toml"
    if not path.exists():
        return Settings()
    display = "pyproject.toml"
    text = read_text_strict(path, display=display, max_bytes=1024 * 1024)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise BadInput(f"invalid TOML: {exc}", path=display) from None
    table = data.get("tool", {}).get("research-dispatch", {})
    if not isinstance(table, dict):
        raise BadInput("must be a table", path=display, field="tool.research-dispatch")
    try:
        return Settings.model_validate(table)
    except ValidationError as exc:
        field, message = _first_error(exc)
        raise BadInput(message, path=display, field=f"tool.research-dispatch.{field}") from None


def effective(topic: Topic, settings: Settings) -> tuple[WordBand, Budget, SearchSettings]:
    """Per-topic overrides fall back to the configured defaults."""
    search = topic.search or settings.search
    if topic.search is not None and "providers" not in topic.search.model_fields_set:
        # A topic that tunes its search (max_results, domains) keeps the configured providers.
        search = search.model_copy(update={"providers": settings.search.providers})
    return (topic.words or settings.words, topic.budget or settings.budget, search)


def select_topics(topics: Iterable[TopicFile], ids: Iterable[str] | None) -> list[TopicFile]:
    """Filter by topic ids; an unknown id is bad input, not an empty plan."""
    topics = list(topics)
    given = list(ids or [])
    if not given:
        return topics
    wanted = [i.strip() for i in given if i.strip()]
    if not wanted:  # e.g. `--topics ',,,'`: a selection of nothing is a mistake, never "all topics"
        raise BadInput("the selection names no topic (only separators or spaces); leave the option out for "
                       "all topics", path="--topics")
    known = {t.topic.id for t in topics}
    unknown = [i for i in wanted if i not in known]
    if unknown:
        raise BadInput(f"unknown topic id(s): {', '.join(sorted(unknown))}", path="--topics")
    return [t for t in topics if t.topic.id in set(wanted)]
