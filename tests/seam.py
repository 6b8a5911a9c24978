"""A scripted model at the `Gateway` seam, and scripted search behind the real toolset.

Like simonw/llm's `MockModel` with `enqueue()`: a test enqueues what the model answers — text, tool
calls, finish reasons, a gateway error — and the product's own code (the research loop, `run_leg`, the
synthesis) runs over it in-process: no HTTP server, no `openai` client. What `ScriptedGateway.complete`
returns is the product's real typed result: a `Completion` whose message went through the product's
`canonical_assistant_turn` and whose `CallRecord` carries the provenance of the call, with the verdict the
product's `route.call_verdict` gives those facts. Everything the product sent is recorded (`sent`). The
gateway decides nothing: a call the test did not script fails the test.

`ScriptedSearch` is a `SearchProvider` over a few fixed pages, so the real `SearchTools` (its source
registry, argument validation, tool errors, budgets) answer the model's tool calls.

What is about the wire — status codes, errors inside HTTP 200 bodies, retries and `Retry-After`,
timeouts, size caps, headers, request shapes — is not scripted here: those tests run the real clients
against the HTTP fakes (`research_dispatch_fakes`).
"""

from __future__ import annotations

import copy
import fnmatch
import itertools
import json
import math
import threading
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from research_dispatch.config.plan import plan_legs
from research_dispatch.config.settings import GatewaySettings, load_settings
from research_dispatch.config.topics import load_topics
from research_dispatch.core.bounds import CallBounds
from research_dispatch.core.errors import GatewayCallTimedOut, GatewayError
from research_dispatch.gateway import route
from research_dispatch.gateway.client import canonical_assistant_turn
from research_dispatch.gateway.endpoints import Pricing
from research_dispatch.gateway.provenance import CallRecord, Completion
from research_dispatch.gateway.reasoning import ReasoningPlan
from research_dispatch.leg.contract import count_words
from research_dispatch.leg.execute import LegServices, run_leg
from research_dispatch.leg.status import LegResult
from research_dispatch.tools.providers import Hit, Pages, SearchQuery
from research_dispatch_fakes.realism import Realism
from research_dispatch_fakes.script_structured import respond_structured
from tests.conftest import CANARY

CHARS_PER_TOKEN = 4  # how the scripted gateway counts the tokens it bills (a server's count, not the product's)


@dataclass(frozen=True)
class ToolCall:
    """One tool call as the model wrote it: `arguments` is the raw text (JSON, or not)."""

    name: str
    arguments: str
    id: str = ""
    type: str = "function"


def tool(name: str, arguments: dict[str, Any] | str | None = None, *, call_id: str = "",
         call_type: str = "function") -> ToolCall:
    """A tool call; a dict is sent as JSON, a string as it is (malformed arguments are a string)."""
    text = arguments if isinstance(arguments, str) else json.dumps(arguments or {})
    return ToolCall(name, text, call_id, call_type)


@dataclass(frozen=True)
class Reply:
    """What the model answers to one call.

    `finish_reason` defaults to `tool_calls` with calls, else `stop`. `served_model` defaults to the
    requested model and `served_provider` to the pinned provider (else "Scripted"). `cost_usd` defaults
    to the sizes priced at the gateway's `prices` (0 without prices); `metadata=False` is a response
    without router metadata, `cached=True` a response-cache hit.
    """

    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: str | None = None
    served_model: str | None = None
    served_provider: str | None = None
    cost_usd: float | None = None
    metadata: bool = True
    cached: bool = False


def text(content: str, *, finish_reason: str | None = None) -> Reply:
    return Reply(content=content, finish_reason=finish_reason)


def calls(*tool_calls: ToolCall, content: str = "") -> Reply:
    return Reply(content=content, tool_calls=tuple(tool_calls))


def search(query: str = "DiLoCo low-communication training") -> Reply:
    return calls(tool("web_search", {"query": query}))


def extract(*urls: str, query: str = "what the page says") -> Reply:
    return calls(tool("web_extract", {"urls": list(urls), "query": query}))


@dataclass(frozen=True)
class Sent:
    """One call as the product made it (a snapshot: the history is copied when sent)."""

    model: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None
    tool_choice: str | dict[str, Any] | None
    provider: str | None
    session_id: str | None
    response_format: dict[str, Any] | None
    max_completion_tokens: int | None
    purpose: str
    deadline: float | None

    @property
    def schema(self) -> str | None:
        """The json_schema name of a structured-output call."""
        return ((self.response_format or {}).get("json_schema") or {}).get("name")

    @property
    def last(self) -> dict[str, Any]:
        return self.messages[-1]

    def tool_results(self) -> list[str]:
        return [str(m.get("content")) for m in self.messages if m.get("role") == "tool"]

    def user_messages(self) -> list[str]:
        return [str(m.get("content")) for m in self.messages if m.get("role") == "user"]

    def body(self) -> dict[str, Any]:
        """The call as a chat-completions request body (what a scripted behaviour of the fakes reads)."""
        body: dict[str, Any] = {"model": self.model, "messages": self.messages}
        for key in ("tools", "tool_choice", "response_format", "session_id"):
            if getattr(self, key) is not None:
                body[key] = getattr(self, key)
        return body


Responder = Callable[[Sent], "Reply | GatewayError"]
Step = Reply | GatewayError | Responder


class ScriptExhausted(AssertionError):
    """The product made a call the test did not script."""


class ScriptedGateway:
    """An in-process model gateway that answers from an enqueued script (the `ModelGateway` protocol).

    `enqueue(*steps)` appends to the script every call reads from; `enqueue(*steps, session=GLOB)`
    appends to a script only calls whose `session_id` matches read from (first), so that calls made in
    parallel (the synthesis' extractions) each get their own answers. A step is a `Reply`, a
    `GatewayError` (raised, as the real gateway raises after its retries), or a function of the `Sent`
    call returning either. `otherwise` answers every call no script has a step for (without it, such a
    call fails the test).
    """

    def __init__(self, *steps: Step, prices: Pricing | None = None, settings: GatewaySettings | None = None,
                 otherwise: Responder | None = None, context_tokens: int | None = None) -> None:
        self.settings = settings or GatewaySettings()
        self.prices = prices
        self.context_tokens = context_tokens
        self.otherwise = otherwise
        self.sent: list[Sent] = []
        self.records: list[CallRecord] = []
        self._default: deque[Step] = deque(steps)
        self._by_session: dict[str, deque[Step]] = {}
        self._lock = threading.Lock()

    # -- the script ----------------------------------------------------------------------------
    def enqueue(self, *steps: Step, session: str | None = None) -> ScriptedGateway:
        with self._lock:
            queue = self._default if session is None else self._by_session.setdefault(session, deque())
            queue.extend(steps)
        return self

    def left(self) -> int:
        """Steps not yet used (a test that scripted exactly the calls expects 0)."""
        with self._lock:
            return len(self._default) + sum(len(q) for q in self._by_session.values())

    def calls_for(self, session: str, schema: str | None = None) -> list[Sent]:
        """The calls whose session id matches the glob `session` (and, given, of this structured schema)."""
        with self._lock:
            return [c for c in self.sent if fnmatch.fnmatchcase(c.session_id or "", session)
                    and (schema is None or c.schema == schema)]

    def _next(self, sent: Sent) -> Step:
        with self._lock:
            self.sent.append(sent)
            for pattern, queue in self._by_session.items():
                if queue and fnmatch.fnmatchcase(sent.session_id or "", pattern):
                    return queue.popleft()
            if self._default:
                return self._default.popleft()
        if self.otherwise is not None:
            return self.otherwise
        raise ScriptExhausted(f"call {len(self.sent)} ({sent.purpose}, session {sent.session_id}) was not scripted; "
                              f"last message: {str(sent.last.get('content'))[:120]!r}")

    # -- the ModelGateway protocol ---------------------------------------------------------------
    def complete(self, *, model: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
                 tool_choice: str | dict[str, Any] | None = None, provider: str | None = None,
                 session_id: str | None = None, response_format: dict[str, Any] | None = None,
                 max_completion_tokens: int | None = None, purpose: str = "research", deadline: float | None = None,
                 spent: Callable[[CallRecord], None] | None = None, cache_boundary: int | None = None
                 ) -> Completion:
        """A scripted model gives up no attempt, so `spent` is never called; `cache_boundary` is ignored."""
        sent = Sent(model=model, messages=copy.deepcopy(messages), tools=copy.deepcopy(tools),
                    tool_choice=tool_choice, provider=provider, session_id=session_id,
                    response_format=copy.deepcopy(response_format), max_completion_tokens=max_completion_tokens,
                    purpose=purpose, deadline=deadline)
        step = self._next(sent)
        answer = step(sent) if callable(step) and not isinstance(step, (Reply, GatewayError)) else step
        if isinstance(answer, GatewayError):
            raise answer
        assert isinstance(answer, Reply), answer
        return self._completion(sent, answer)

    def complete_structured(self, *, model: str, messages: list[dict[str, Any]], name: str, schema: dict[str, Any],
                            provider: str | None = None, session_id: str | None = None,
                            max_completion_tokens: int | None = None, purpose: str = "structured",
                            deadline: float | None = None,
                            spent: Callable[[CallRecord], None] | None = None) -> Completion:
        """Structured output as a `json_schema` response format, the form OpenRouter takes."""
        response_format = {"type": "json_schema", "json_schema": {"name": name, "strict": True, "schema": schema}}
        return self.complete(model=model, messages=messages, provider=provider, session_id=session_id,
                             response_format=response_format, max_completion_tokens=max_completion_tokens,
                             purpose=purpose, deadline=deadline, spent=spent)

    def reasoning_plan(self, model: str, provider: str | None = None) -> ReasoningPlan:
        """No reasoning parameter: the whole output cap of the settings is the answer's."""
        return ReasoningPlan(None, self.settings.max_completion_tokens, 0)

    def pricing(self, model: str, provider_slug: str | None = None) -> Pricing | None:
        return self.prices

    def context_window(self, model: str, provider_slug: str | None = None) -> int | None:
        return self.context_tokens

    def close(self) -> None:
        return None

    def __enter__(self) -> ScriptedGateway:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the typed result ----------------------------------------------------------------------
    def _completion(self, sent: Sent, reply: Reply) -> Completion:
        reply = self._capped(sent, reply)
        wire_calls = [{"id": call.id or f"call_{len(self.sent)}_{index}", "type": call.type,
                       "function": {"name": call.name, "arguments": call.arguments}}
                      for index, call in enumerate(reply.tool_calls)]
        message = canonical_assistant_turn({"role": "assistant", "content": reply.content, "tool_calls": wire_calls})
        finish_reason = reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")
        prompt_tokens, completion_tokens = self._tokens(sent, reply)
        served_model = reply.served_model or sent.model
        served_provider = (reply.served_provider or sent.provider or "Scripted") if reply.metadata else None
        metadata = reply.metadata and not reply.cached
        with self._lock:
            number = len(self.records) + 1
            record = CallRecord(
                generation_id=f"gen-scripted-{number:06d}", requested_model=sent.model,
                requested_provider=sent.provider, served_model=served_model, served_provider=served_provider,
                metadata_present=metadata, attempt=1 if metadata else None, attempts_recorded=1 if metadata else 0,
                strategy="direct" if metadata else None, cached=reply.cached, finish_reason=finish_reason,
                native_finish_reason=finish_reason, prompt_tokens=prompt_tokens,
                completion_tokens=completion_tokens, cached_tokens=0, reasoning_tokens=0,
                cost_usd=self._cost(reply, prompt_tokens, completion_tokens), latency_s=0.0, retries=0,
                purpose=sent.purpose, gateway_kind=self.settings.kind,
                verdict=route.call_verdict(requested_model=sent.model, pinned_provider=sent.provider,
                                           served_model=served_model, served_provider=served_provider,
                                           metadata_present=metadata, attempt=1 if metadata else None,
                                           attempts_recorded=1 if metadata else 0, cached=reply.cached))
            self.records.append(record)
        return Completion(message=message, finish_reason=finish_reason, record=record)

    @staticmethod
    def _capped(sent: Sent, reply: Reply) -> Reply:
        """A server honours the output cap: text past `max_completion_tokens` is cut, `finish_reason: length`."""
        cap = sent.max_completion_tokens
        if cap is None or reply.tool_calls or math.ceil(len(reply.content) / CHARS_PER_TOKEN) <= cap:
            return reply
        return replace(reply, content=reply.content[:cap * CHARS_PER_TOKEN], finish_reason="length")

    @staticmethod
    def _tokens(sent: Sent, reply: Reply) -> tuple[int, int]:
        """Tokens as a server would bill them: every content and argument character, and the tools."""
        chars = sum(len(str(m.get("content") or "")) + len(json.dumps(m.get("tool_calls") or []))
                    for m in sent.messages) + len(json.dumps(sent.tools or []))
        out = len(reply.content) + sum(len(call.arguments) for call in reply.tool_calls)
        return max(1, math.ceil(chars / CHARS_PER_TOKEN)), max(1, math.ceil(out / CHARS_PER_TOKEN))

    def _cost(self, reply: Reply, prompt_tokens: int, completion_tokens: int) -> float:
        if reply.cost_usd is not None:
            return reply.cost_usd
        if self.prices is None or reply.cached:
            return 0.0
        price = self.prices.at(prompt_tokens)
        return round(prompt_tokens * price.prompt + completion_tokens * price.completion, 10)


def synthesis_model(sent: Sent) -> Reply:
    """The fakes' scripted extractor and judge (`research_dispatch_fakes.script_structured`), in-process: a
    structured answer derived from the request alone, deterministic, as the fake gateway serves it."""
    return Reply(content=json.dumps(respond_structured(sent.body())), served_provider="OpenAI")


def realistic_model(rate: float, seed: int, quirks: Iterable[str] = ()) -> Responder:
    """The fakes' scripted extractor and judges answering as real models do: the fake's `realism` setting
    (`research_dispatch_fakes.realism`: copy slips, pointers off by one, swapped positions, aliases, a
    malformed claim) at `rate`, drawn from `seed`; `quirks` are the scenario flags of a misbehaving model
    (`agreeable`, `obedient`, ...) on every structured call."""
    setting = Realism(rate, seed)
    flags = frozenset(quirks)
    return lambda sent: Reply(content=json.dumps(respond_structured(sent.body(), flags, setting)),
                              served_provider="OpenAI")


class Hang:
    """A call that does not answer until the test releases it: a model slower than any time limit. It
    records that it started and whether it ever answered (a stage that waited for it would show)."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()
        self.answered = threading.Event()

    def __call__(self, sent: Sent) -> Reply | GatewayError:
        self.started.set()
        self.release.wait(timeout=120)
        self.answered.set()
        return GatewayCallTimedOut(f"model call to {sent.model}: released by the test", error_type="timeout")


# ----------------------------------------------------------------------------------------------
# search


@dataclass(frozen=True)
class Page:
    url: str
    title: str
    text: str

    @property
    def snippet(self) -> str:
        return self.text.split(". ", 1)[0] + "."


def _paragraphs(subject: str, facts: Sequence[str]) -> str:
    return "\n\n".join(f"{subject} {fact}. This is stated in the paper's evaluation with the setup it used."
                       for fact in facts)


PAGES: tuple[Page, ...] = (
    Page("https://arxiv.org/abs/2311.08105", "DiLoCo: Distributed Low-Communication Training of Language Models",
         _paragraphs("DiLoCo", ["trains language models on islands of poorly connected devices",
                                "communicates 500 times less than fully synchronous data parallelism",
                                "uses AdamW as the inner optimiser and Nesterov momentum as the outer one"])),
    Page("https://arxiv.org/abs/2501.18512", "Streaming DiLoCo with overlapping communication",
         _paragraphs("Streaming DiLoCo", ["synchronises subsets of parameters in turn",
                                          "overlaps communication with computation",
                                          "quantises the outer gradients to four bits"])),
    Page("https://github.com/PrimeIntellect-ai/OpenDiLoCo", "OpenDiLoCo",
         _paragraphs("OpenDiLoCo", ["reproduces DiLoCo at billion-parameter scale",
                                    "runs across two continents with 90 percent compute utilisation"])),
    Page("https://www.primeintellect.ai/blog/intellect-2", "INTELLECT-2 technical report",
         _paragraphs("INTELLECT-2", ["was trained with GRPO across a permissionless pool of compute providers",
                                     "shows that decentralised reinforcement learning reaches 32B parameters"])),
)


@dataclass
class ScriptedSearch:
    """A search provider over fixed pages: every search returns them all (up to `max_results`), in order;
    an extract returns the text of the pages it knows. `failures` are raised by the next calls, in order."""

    pages: Sequence[Page] = PAGES
    name: str = "tavily"
    failures: deque[Exception] = field(default_factory=deque)
    searches: list[SearchQuery] = field(default_factory=list)
    extracts: list[list[str]] = field(default_factory=list)
    closed: bool = False

    def search(self, request: SearchQuery, *, bounds: CallBounds, timeout_s: float) -> list[Hit]:
        self.searches.append(request)
        if self.failures:
            raise self.failures.popleft()
        return [Hit(page.url, page.title, page.snippet) for page in self.pages][:request.max_results]

    def extract(self, urls: list[str], *, bounds: CallBounds, timeout_s: float) -> Pages:
        self.extracts.append(list(urls))
        if self.failures:
            raise self.failures.popleft()
        known = {page.url: page for page in self.pages}
        return Pages(texts={u: known[u].text for u in urls if u in known},
                     failed={u: "not found" for u in urls if u not in known})

    def close(self) -> None:
        self.closed = True


# ----------------------------------------------------------------------------------------------
# what a researcher writes


_SENTENCE = ("The evidence gathered for this review points to a consistent picture of what the method achieves, "
             "where it has been reproduced and which parts remain open for the replication framework")
_FILLER = _SENTENCE.split()


def report(words: int, cite: Iterable[str] = ("S1", "S2", "S3"), *, title: str = "DiLoCo family") -> str:
    """A Markdown report of exactly `words` words (the contract's count) citing `cite`, one per paragraph."""
    ids = list(cite)
    sections = ["Summary", "Analysis", "Recommendations", "Open questions"]
    head = f"# {title}\n"
    parts: list[str] = []
    body_words = words - count_words(head) - sum(count_words(f"## {s}") for s in sections)
    per_section, extra = divmod(body_words, len(sections))
    for index, section in enumerate(sections):
        n = per_section + (1 if index < extra else 0)
        sentences: list[str] = []
        written = 0
        while written < n:
            take = min(len(_FILLER), n - written)
            citation = f" [{ids[(len(sentences) + index) % len(ids)]}]" if ids else ""
            sentences.append(" ".join(_FILLER[:take]) + citation + ".")
            written += take
        parts.append(f"## {section}\n\n" + " ".join(sentences))
    document = head + "\n" + "\n\n".join(parts) + "\n"
    assert count_words(document) == words, (count_words(document), words)
    return document


URLS = tuple(page.url for page in PAGES)


PLAN = ("1. How much communication DiLoCo saves, and at what quality cost — https://arxiv.org/abs/2311.08105\n"
        "2. Which systems ran it at production scale — https://www.primeintellect.ai/blog/intellect-2")
"""The plan a researcher states in its first turn: the brief's sub-questions, numbered, each with its source."""
DONE = "I have the evidence: each sub-question has a source read in full."
"""A reply without tool calls in the research conversation: research is over."""
COVERED = "1: S1, S2\n2: S4"
"""The gap check's answer when every sub-question rests on pages read in full (`extract(*URLS[:3])` reads S1,
S2 and S4 of the diloco-family leg, whose brief's URLs are S1–S3)."""


def planned_search(query: str = "DiLoCo low-communication training") -> Reply:
    """The first turn: the plan, and a first search."""
    return calls(tool("web_search", {"query": query}), content=PLAN)


def research_turns() -> tuple[Reply, ...]:
    """A researcher that states its plan, searches, reads three pages, says it is done and answers the gap
    check with every sub-question covered: what comes next is the writing call."""
    return planned_search(), extract(*URLS[:3]), text(DONE), text(COVERED)


def good_leg(words: int = 2200) -> tuple[Reply, ...]:
    """`research_turns`, then a report in the default band citing S1–S3, written from the dossier."""
    return *research_turns(), text(report(words))


def split(document: str, *shares: float) -> list[str]:
    """The document cut at spaces at these shares of its length: the parts a truncated reply and its
    continuations carry (joined, they are the document again)."""
    cuts = [document.rfind(" ", 0, int(len(document) * share)) for share in shares]
    bounds = [0, *cuts, len(document)]
    return [document[a:b] for a, b in itertools.pairwise(bounds)]


# ----------------------------------------------------------------------------------------------
# one leg, the product's own code over the scripted services

SEAM_ENV = {"OPENROUTER_API_KEY": CANARY["OPENROUTER_API_KEY"], "TAVILY_API_KEY": CANARY["TAVILY_API_KEY"]}
"""The keys a leg checks before it starts (canaries: nothing is sent anywhere)."""
CYCLE = "2026-H2"


def research(repo: Path, stem: str, gateway: ScriptedGateway, search: ScriptedSearch | None = None, *,
             clock: Callable[[], float] | None = None) -> LegResult:
    """`run_leg` for the planned leg `stem`, over the scripted gateway and search (`LegServices`)."""
    settings = load_settings(repo)
    [leg] = [leg for leg in plan_legs(load_topics(repo, settings), settings) if leg.stem == stem]
    return run_leg(repo, settings, leg, env=SEAM_ENV, cycle=CYCLE, clock=clock,
                   services=LegServices(gateway=gateway, search=[search or ScriptedSearch()]))
