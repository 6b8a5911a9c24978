"""Scripted faults of the fake search services (Tavily, Exa): one rule shape, one strict parser.

A scenario's `rules` say which calls of which endpoint fail, and how: an HTTP error status with a
message (and, for services whose errors carry one, a tag), a delay, an empty answer, or pages that fail
to be read. A typo in a test's scenario must fail loudly, so every key and value is checked, and errors
name the rule by its index. Like every fake, this imports nothing of the product.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

RULE_KEYS = frozenset({"endpoint", "on_call", "calls", "times", "status", "message", "delay_s", "empty",
                       "fail_urls"})


@dataclass
class FaultRule:
    """One scripted fault: which calls it hits (`calls` None: all; `times` None: unlimited) and what it does."""

    endpoint: str
    calls: frozenset[int] | None
    times: int | None
    status: int | None
    message: str | None
    delay_s: float
    empty: bool
    fail_urls: frozenset[str]
    tag: str | None = None
    fired: int = 0

    def matches(self, endpoint: str, call: int) -> bool:
        return (self.endpoint in ("*", endpoint) and (self.calls is None or call in self.calls)
                and (self.times is None or self.fired < self.times))


def non_negative(value: Any, what: str) -> float:
    """A scenario duration; JSON booleans are ints in Python and must not sneak through."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise ValueError(f"{what} must be a non-negative number, got {value!r}")
    return float(value)


def count(value: Any, what: str, minimum: int = 1) -> int:
    """A scenario count (call number, cap); booleans are rejected for the same reason."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{what} must be an integer >= {minimum}, got {value!r}")
    return value


def parse_rules(raw: Any, *, endpoints: Iterable[str], normalise_url: Callable[[str], str],
                with_tag: bool = False) -> list[FaultRule]:
    """The `rules` list of a scenario. `with_tag`: the service's errors carry a tag (Exa's do)."""
    if not isinstance(raw, list):
        raise ValueError("scenario.rules must be a list")
    return [parse_rule(item, index, endpoints=tuple(endpoints), normalise_url=normalise_url, with_tag=with_tag)
            for index, item in enumerate(raw)]


def parse_rule(raw: Any, index: int, *, endpoints: tuple[str, ...], normalise_url: Callable[[str], str],
               with_tag: bool = False) -> FaultRule:
    """One scenario rule; errors name the rule's index so a long scenario is easy to fix."""
    where = f"rules[{index}]"
    allowed = RULE_KEYS | ({"tag"} if with_tag else set())
    if not isinstance(raw, dict):
        raise ValueError(f"{where} must be an object")
    unknown = set(raw) - allowed
    if unknown:
        raise ValueError(f"{where} has unknown keys {sorted(unknown)}; allowed: {sorted(allowed)}")
    endpoint = raw.get("endpoint", "*")
    if endpoint not in (*endpoints, "*"):
        names = ", ".join(repr(e) for e in endpoints)
        raise ValueError(f"{where}.endpoint must be {names} or '*', got {endpoint!r}")
    if "on_call" in raw and "calls" in raw:
        raise ValueError(f"{where}: give either on_call or calls, not both")
    calls: frozenset[int] | None = None
    if "on_call" in raw:
        calls = frozenset({count(raw["on_call"], f"{where}.on_call")})
    elif "calls" in raw:
        if not isinstance(raw["calls"], list) or not raw["calls"]:
            raise ValueError(f"{where}.calls must be a non-empty list of call numbers")
        calls = frozenset(count(c, f"{where}.calls[]") for c in raw["calls"])
    status = raw.get("status")
    if status is not None and (isinstance(status, bool) or not isinstance(status, int) or not 400 <= status <= 599):
        raise ValueError(f"{where}.status must be an HTTP error status (400-599), got {status!r}")
    for key in ("message", "tag"):
        if raw.get(key) is not None and not isinstance(raw[key], str):
            raise ValueError(f"{where}.{key} must be a string")
    fail_urls = raw.get("fail_urls", [])
    if not isinstance(fail_urls, list) or not all(isinstance(u, str) for u in fail_urls):
        raise ValueError(f"{where}.fail_urls must be a list of URLs")
    empty = raw.get("empty", False)
    if not isinstance(empty, bool):
        raise ValueError(f"{where}.empty must be true or false")
    return FaultRule(endpoint=endpoint, calls=calls,
                     times=count(raw["times"], f"{where}.times") if "times" in raw else None,
                     status=status, message=raw.get("message"), tag=raw.get("tag"),
                     delay_s=non_negative(raw.get("delay_s", 0.0), f"{where}.delay_s"), empty=empty,
                     fail_urls=frozenset(normalise_url(u) for u in fail_urls))
