"""Typed records read back from disk: every field checked against its dataclass annotation.

Call logs (`research/<stem>.calls.jsonl`) and leg status files (`build/legs/<stem>.json`) are written
by us, but read back from disk and from CI artifacts, where they may be damaged, hand-edited or forged.
A dataclass accepts any value for any field, so a `"cost_usd": "abc"` or a NaN would travel on and
fail far away (a format string in the PR body, a comparison in the route check) as an "internal
error". Here each value is checked against the annotation at the door, and the error names the field.

Rules: types are exact (a bool is not an int, a string is not a number); ints and floats must be
finite and not negative (every number in these records is a count, an amount or a duration), so the
`NaN`/`Infinity` that Python's JSON parser accepts are refused here, naming the field.
"""

from __future__ import annotations

import enum
import json
import math
import types
import typing
from typing import Any

from pydantic import ValidationError

__all__ = ["check_record", "check_value", "first_error", "load_record"]


def load_record(text: str, cls: type[Any], *, required: typing.Iterable[str] | None = None) -> dict[str, Any]:
    """Parse one JSON object and `check_record` it against `cls`; `ValueError` names what is wrong."""
    return check_record(json.loads(text), cls, required=required)


def _describe(options: tuple[Any, ...]) -> str:
    names = []
    for option in options:
        if option is type(None):
            names.append("null")
        elif typing.get_origin(option) is list:
            names.append("list")
        else:
            names.append(getattr(option, "__name__", str(option)))
    return " or ".join(sorted(names))


def check_value(name: str, value: Any, hint: Any) -> None:
    """Raise `ValueError` naming `name` unless `value` fits the annotation `hint`."""
    options = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else (hint,)
    if value is None:
        if type(None) in options:
            return
        raise ValueError(f"{name}: null where {_describe(options)} is expected")
    if isinstance(value, bool):
        if bool in options:
            return
    elif isinstance(value, int) and int in options:
        if value < 0:
            raise ValueError(f"{name}: {value} is negative")
        return
    elif isinstance(value, (int, float)) and float in options:
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"{name}: {value!r} is not a finite, non-negative number")
        return
    elif isinstance(value, str) and str in options:
        return
    elif isinstance(value, str) and any(isinstance(o, type) and issubclass(o, enum.Enum)
                                        and value in {m.value for m in o} for o in options):
        return  # a string enum field (e.g. a leg's status) holding one of its values
    elif isinstance(value, list):
        for option in options:
            if typing.get_origin(option) is list:
                (item_hint,) = typing.get_args(option) or (Any,)
                for index, item in enumerate(value):
                    if item_hint is not Any:
                        check_value(f"{name}[{index}]", item, item_hint)
                return
    shown = str(value)[:40]
    raise ValueError(f"{name}: {type(value).__name__} {shown!r} where {_describe(options)} is expected")


def check_record(data: Any, cls: type[Any], *, required: typing.Iterable[str] | None = None) -> dict[str, Any]:
    """The fields of `cls` found in `data`, each checked; unknown keys are dropped.

    `required` (default: every field) must be present; a missing optional field takes the dataclass
    default when `cls(**result)` is built."""
    if not isinstance(data, dict):
        raise ValueError(f"a JSON {type(data).__name__}, not an object")
    hints = typing.get_type_hints(cls)
    needed = set(hints if required is None else required)
    result: dict[str, Any] = {}
    for name, hint in hints.items():
        if name not in data:
            if name in needed:
                raise ValueError(f"{name}: missing")
            continue
        check_value(name, data[name], hint)
        result[name] = data[name]
    return result


def first_error(exc: ValidationError) -> tuple[str, str]:
    """The first pydantic error as (dotted field path, message) for a one-line report: how a settings
    file, a topic file or a report's front matter names what is wrong (`tool.research-dispatch.jobs`,
    `models[1].model`, `usage.cost_usd`)."""
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
