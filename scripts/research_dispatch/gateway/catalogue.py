"""Models checked before any leg spends: every model the plan and the synthesis name exists at the
gateway and lists what its calls need (issue 22 point 3; `check --online`).

Why before the first leg: a typo'd slug (`openai/gtp-5`) or an extraction model whose endpoints do not
list `structured_outputs` is otherwise found only when the call is made — for the extractor, after
every leg has spent its dollars ("every extraction failed"). The gateway's own listings say it for
free, and the request shaping (`endpoints.request_shape`) would refuse those calls anyway.

What each call needs (what `Gateway._request` marks required under `require_parameters`):

* a researcher leg: `tools` (its search, extract and MCP tools) — on its pinned provider's endpoints
  when the topic pins one;
* the synthesis's extractor and judges: `response_format` and `structured_outputs` (they ask for a
  `json_schema` response format).

Where it is read: `GET /models` (the model list: `id`, `canonical_slug`, and `supported_parameters`, the
union over the model's endpoints) says which models exist — a dated permaslug or a `:variant` of a
listed model counts as that model — and suggests the nearest ids for one that does not; a model with a
pinned provider is checked on that provider's endpoints (`GET /models/{author}/{slug}/endpoints`).

One implementation, several callers: `check --online` prints every problem at once, and `run` and
`research` call `require_models` before their first leg. Other preflights (paths, cycle, symlinks) run
beside it: `model_problems` is a pure function of the uses and the listings, so any caller can merge its
problems with their own. An `openai-compatible` gateway publishes no such listing (DESIGN: no endpoints
look-ups), so nothing is checked there.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from research_dispatch.config.uses import ModelUse
from research_dispatch.core.errors import BadInput, ErrorInResponse, Problem
from research_dispatch.gateway.endpoints import Endpoint, candidates

SUGGESTIONS = 3


@dataclass(frozen=True)
class ListedModel:
    """One entry of `GET /models` → `data[]`."""

    id: str
    canonical_slug: str
    supported_parameters: frozenset[str]


@dataclass(frozen=True)
class Catalogue:
    """The gateway's model list."""

    models: tuple[ListedModel, ...]

    def find(self, slug: str) -> ListedModel | None:
        """The listed model a slug names: its `id` or `canonical_slug`, a dated permaslug of either
        (`…-20260401`), or either with a `:variant` suffix."""
        base = slug.split(":", 1)[0]
        for model in self.models:
            if base in (model.id, model.canonical_slug):
                return model
        for model in self.models:
            if base.startswith((model.id + "-", model.canonical_slug + "-")) and base.rsplit("-", 1)[1].isdigit():
                return model
        return None

    def suggestions(self, slug: str) -> list[str]:
        """The listed ids nearest to a slug that is not listed (for a typo: `openai/gtp-5` → `openai/gpt-5`)."""
        ids = sorted({m.id for m in self.models})
        near = difflib.get_close_matches(slug, ids, n=SUGGESTIONS, cutoff=0.75)
        if near:
            return near
        author = slug.split("/", 1)[0]  # a name nobody spells alike: at least the author's models
        return [i for i in ids if i.split("/", 1)[0] == author][:SUGGESTIONS]


def parse_catalogue(payload: Any) -> Catalogue:
    """`{"data": [...]}` of `GET /models` as a catalogue; anything else is an error in the response."""
    data = payload.get("data") if isinstance(payload, Mapping) else None
    if not isinstance(data, list):
        raise ErrorInResponse("the gateway's model list (GET /models) has no `data` list")
    models: list[ListedModel] = []
    for entry in data:
        if not isinstance(entry, Mapping) or not isinstance(entry.get("id"), str):
            continue
        params = entry.get("supported_parameters")
        models.append(ListedModel(
            id=entry["id"], canonical_slug=str(entry.get("canonical_slug") or entry["id"]),
            supported_parameters=frozenset(str(p) for p in params) if isinstance(params, list) else frozenset()))
    return Catalogue(tuple(models))


def model_problems(uses: Sequence[ModelUse], catalogue: Catalogue,
                   endpoints_of: Callable[[str], list[Endpoint]]) -> list[Problem]:
    """Every problem of every use, in the order of the uses (each model's listing read once)."""
    problems: list[Problem] = []
    for use in uses:
        listed = catalogue.find(use.model)
        if listed is None:
            near = catalogue.suggestions(use.model)
            hint = f"; did you mean {' or '.join(near)}?" if near else ""
            problems.append(Problem(use.path, use.field, f"{use.model} is not a model the gateway lists{hint}"))
            continue
        if use.provider:  # the pinned provider's endpoints must take the calls (as `request_shape` decides)
            pinned = candidates(endpoints_of(listed.id), use.provider)
            if not pinned:
                problems.append(Problem(use.path, use.field.replace(".model", ".provider"),
                                             f"no endpoint of {use.model} is served by provider {use.provider}"))
            elif not any(use.needs <= e.supported_parameters for e in pinned):
                offered = frozenset().union(*(e.supported_parameters for e in pinned))
                lacking = sorted(use.needs - offered) or sorted(use.needs)
                problems.append(Problem(use.path, use.field, f"{use.model} via {use.provider} does not list "
                                             f"{', '.join(lacking)}, which {use.purpose}'s calls need"))
            continue
        lacking = sorted(use.needs - listed.supported_parameters)
        if lacking:
            problems.append(Problem(use.path, use.field, f"{use.model} does not list {', '.join(lacking)} in "
                                         f"its supported parameters, which {use.purpose}'s calls need"))
    return problems


class ModelsRefused(BadInput):
    """Some model the run would call does not exist or cannot take its calls: exit 2, before any leg.
    The message is one line per problem."""

    def __init__(self, lines: Sequence[str]) -> None:
        super().__init__("\n".join(lines))
        self.lines = list(lines)

    @classmethod
    def from_lines(cls, lines: Sequence[str]) -> ModelsRefused:
        return cls(lines)
