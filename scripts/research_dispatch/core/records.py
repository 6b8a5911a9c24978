"""Typed records read back from disk, checked by pydantic against their dataclass, naming the field.

Call logs (`research/<stem>.calls.jsonl`) and leg status files (`build/legs/<stem>.json`) are written
by us, but read back from disk and from CI artifacts, where they may be damaged, hand-edited or forged.
A dataclass accepts any value for any field, so a `"cost_usd": "abc"` or a NaN would travel on and
fail far away (a format string in the PR body, a comparison in the route check) as an "internal
error". Here each record is validated at the door by pydantic (`TypeAdapter` over the dataclass, in
strict mode: a bool is not an int, a string is not a number; NaN and Infinity, which Python's JSON
accepts, are refused), and the error names the field in the house's one-line form.

One rule of ours on top: every number in these records is a count, an amount or a duration, so ints
and floats must not be negative. A record class opts in with `@record` (the strict configuration);
unknown keys (a newer writer's) are ignored.
"""

from __future__ import annotations

import difflib
import functools
import json
import types
import typing
from collections.abc import Callable, Iterable
from dataclasses import fields, is_dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError, with_config

from research_dispatch.core.errors import BadInput, Problem

__all__ = ["ValidationProblems", "check_value", "first_error", "load_record", "record", "validation_problems"]

T = TypeVar("T")
RECORD_CONFIG = ConfigDict(strict=True, allow_inf_nan=False)
record = with_config(RECORD_CONFIG)
"""Decorator for a dataclass read back by `load_record`: pydantic validates it strictly."""


@functools.cache
def _adapter(hint: Any) -> TypeAdapter[Any]:
    if is_dataclass(hint):  # its configuration is the class's own: it must be ours
        if getattr(hint, "__pydantic_config__", None) is not RECORD_CONFIG:
            raise TypeError(f"{hint!r} is read back as a record: decorate it with @record")
        return TypeAdapter(hint)
    return TypeAdapter(hint, config=RECORD_CONFIG)


def load_record(text: str, cls: type[T], *, required: Iterable[str] | None = None) -> T:
    """Parse one JSON object as the `@record` dataclass `cls`; `ValueError` names what is wrong.

    `required` (default: every field, also those with defaults) must be present; a missing optional
    field takes the dataclass default."""
    data = json.loads(text)  # the keys as written: `required`, and the sign rule on the values as written
    if not isinstance(data, dict):
        raise ValueError(f"a JSON {type(data).__name__}, not an object")
    names = [f.name for f in fields(cls)]  # type: ignore[arg-type]
    needed = set(names if required is None else required)
    missing = next((name for name in names if name in needed and name not in data), None)
    if missing is not None:
        raise ValueError(f"{missing}: missing")
    try:
        value: T = _adapter(typing.cast(Any, cls)).validate_json(text)
    except ValidationError as exc:
        raise ValueError(_problem(exc, cls)) from None
    hints = typing.get_type_hints(cls)
    for name in names:  # the values as written (an int cost stays an int in the message)
        if name in data:
            _non_negative(name, data[name], hints[name])
    return value


def check_value(name: str, value: Any, hint: Any) -> None:
    """Raise `ValueError` naming `name` unless `value` fits the annotation `hint` (strictly, finite and
    not negative), as a field of a record would be checked."""
    try:
        _adapter(hint).validate_python(value)
    except ValidationError as exc:
        raise ValueError(_problem(exc, hint, name)) from None
    _non_negative(name, value, hint)


def _non_negative(name: str, value: Any, hint: Any) -> None:
    """Our one rule beyond the types: no number in a record is negative (lists: every item)."""
    if isinstance(value, list):
        for index, item in enumerate(value):
            _non_negative(f"{name}[{index}]", item, _hint_at(hint, (index,)))
    elif isinstance(value, int | float) and not isinstance(value, bool) and value < 0:
        if float in _options(hint):
            raise ValueError(f"{name}: {value!r} is not a finite, non-negative number")
        raise ValueError(f"{name}: {value} is negative")


def _problem(exc: ValidationError, hint: Any, name: str = "") -> str:
    """The first error as `field: what is wrong` (`cost_usd: str 'lots' where float is expected`);
    `hint` is the annotation validated (a record's class), `name` what it is called (a record: "")."""
    error = exc.errors()[0]
    loc, value = error["loc"], error["input"]
    if error["type"] == "dataclass_type":
        return f"a JSON {type(value).__name__}, not an object"
    for part in loc:
        name += f"[{part}]" if isinstance(part, int) else f".{part}" if name else str(part)
    if error["type"] == "missing":
        return f"{name}: missing"
    if error["type"] == "finite_number":
        return f"{name}: {value!r} is not a finite, non-negative number"
    expected = _describe(_options(_hint_at(hint, loc)))
    if value is None:
        return f"{name}: null where {expected} is expected"
    return f"{name}: {type(value).__name__} {str(value)[:40]!r} where {expected} is expected"


def _hint_at(hint: Any, loc: tuple[int | str, ...]) -> Any:
    """The annotation of the value at `loc` inside a value annotated `hint`."""
    for part in loc:
        if isinstance(part, int):  # a list item: the list's item type
            hint = next((typing.get_args(o)[0] for o in _options(hint)
                         if typing.get_origin(o) is list and typing.get_args(o)), Any)
        elif is_dataclass(hint):
            hint = typing.get_type_hints(hint).get(part, Any)
    return hint


def _options(hint: Any) -> tuple[Any, ...]:
    return typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else (hint,)


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


MAX_PROBLEMS = 10
"""At most this many problems of one file are listed (then how many more there are)."""


def _dotted(loc: tuple[int | str, ...]) -> str:
    parts: list[str] = []
    for part in loc:
        if isinstance(part, int):
            parts[-1:] = [f"{parts[-1] if parts else ''}[{part}]"]
        else:
            parts.append(str(part))
    return ".".join(parts) or "(root)"


def _model_of(annotation: Any) -> type[BaseModel] | None:
    """The model a field holds, through Optional, tuples, lists and dicts (`mcp.servers.<name>`)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for argument in typing.get_args(annotation):
        found = _model_of(argument)
        if found is not None:
            return found
    return None


def _keys_at(model: type[BaseModel], loc: tuple[int | str, ...]) -> list[str]:
    """The keys a mapping at `loc` (inside `model`) may have, for a did-you-mean."""
    current: type[BaseModel] | None = model
    for part in loc:
        if current is None:
            return []
        if isinstance(part, str) and part in current.model_fields:
            current = _model_of(current.model_fields[part].annotation)
        # an int (a list index) or a dict key: the same model goes on holding the items
    return list(current.model_fields) if current is not None else []


def validation_problems(exc: ValidationError, model: type[BaseModel],
                        where: Callable[[tuple[int | str, ...]], str] | None = None) -> list[tuple[str, str]]:
    """Every pydantic error as (dotted field path, message), in order, for a report of all of them.

    An unknown key gets the nearest allowed key as a did-you-mean; a required key that is missing
    because it was misspelt (`modles:` for `models:`) is said once, on the misspelt key; an error on a
    container that only follows from an error inside it (a list left empty because its item failed)
    is left out. `where` (a file's `strictyaml.locator`) adds each field's position to its message."""
    errors = exc.errors()
    inner = [tuple(e["loc"]) for e in errors]
    errors = [e for e in errors if not any(len(o) > len(e["loc"]) and o[:len(e["loc"])] == tuple(e["loc"])
                                           for o in inner)]
    unknown = {tuple(e["loc"]) for e in errors if e["type"] == "extra_forbidden"}
    problems: list[tuple[str, str]] = []
    explained: set[tuple[int | str, ...]] = set()
    for err in errors:
        loc = tuple(err["loc"])
        message = str(err["msg"]).removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            near = difflib.get_close_matches(str(loc[-1]), _keys_at(model, loc[:-1]), n=1, cutoff=0.6)
            message = "unknown key" + (f"; did you mean {near[0]}?" if near else "")
            if near:
                explained.add((*loc[:-1], near[0]))
        elif err["type"] == "missing":
            if loc in explained or any(other[:-1] == loc[:-1] and difflib.get_close_matches(
                    str(loc[-1]), [str(other[-1])], cutoff=0.6) for other in unknown):
                continue  # the unknown key next to it, its misspelling, says it
            message = "required key is missing"
        if where is not None and err["type"] != "missing":
            position = where(loc)
            message = message.replace(";", position + ";", 1) if ";" in message and "did you mean" in message \
                else message + position
        problems.append((_dotted(loc), message))
    return problems


class ValidationProblems(BadInput):
    """A file with several problems: one line each (`file: field: message`), at most `MAX_PROBLEMS`."""

    def __init__(self, path: str, problems: list[tuple[str, str]], prefix: str = "") -> None:
        listed = [Problem(path, prefix + field, message) for field, message in problems[:MAX_PROBLEMS]]
        if len(problems) > MAX_PROBLEMS:
            listed.append(Problem(path, None, f"… and {len(problems) - MAX_PROBLEMS} more problem(s)"))
        first_field, first_message = problems[0]
        super().__init__(first_message, path=path, field=prefix + first_field)
        self.listed = listed
        self.lines = [problem.line() for problem in listed]
        self.args = ("\n".join(self.lines),)

    def problems(self) -> list[Problem]:
        return list(self.listed)
