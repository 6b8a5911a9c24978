"""Strict YAML reading: the one rule set every YAML document the product reads is held to.

Topic files and report front matter are input a person edits by hand or a CI artifact carries, so
they are parsed defensively: no anchors or aliases (an alias bomb expands without bound), at most
`MAX_YAML_DEPTH` levels of nesting, mapping keys that are unique strings, exactly one document. Every
failure is one `BadInput` line naming the file and the position.

The rules are written once (`check_events`) and checked on the parser's event stream, before anything
is constructed. PyYAML's two parsers emit the same events: libyaml's (`yaml.CSafeLoader`, the reading
path wherever PyYAML was built with it) and the pure-Python one (`yaml.SafeLoader`, the fallback);
`tests/test_strict_yaml.py` checks that both readings agree on every document. Why the event stream
and not a checking loader subclass: every report, ledger and topic read goes through here, and the
pure-Python composer costs ~0.1 ms a node (a report's front matter is ~170 nodes), while libyaml's
events cost a fraction of that; a refresh reads each report several times.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import yaml

from research_dispatch.core.errors import BadInput

MAX_YAML_DEPTH = 12
READER: type[Any] = yaml.CSafeLoader if getattr(yaml, "__with_libyaml__", False) else yaml.SafeLoader
"""The loader documents are read with: libyaml's where PyYAML has it, else PyYAML's own."""
_STR_TAG = "tag:yaml.org,2002:str"
_BLOCK_HEADER = re.compile(
    r"^(?P<indent> *)(?:- +)?(?P<key>[^\s:#'\"][^:#]*?):[ \t]+(?P<style>[|>])[-+0-9]*[ \t]*(?:#.*)?$")
Location = tuple[int | str, ...]
"""Where a value sits in a document: mapping keys and list indexes from the top (`("models", 0, "model")`)."""


def _refuse(problem: str, mark: Any) -> yaml.constructor.ConstructorError:
    return yaml.constructor.ConstructorError(None, None, problem, mark)


def check_events(text: str, loader: type[Any] = READER) -> None:
    """THE rules, on `loader`'s event stream: no aliases or anchors, at most `MAX_YAML_DEPTH` levels,
    mapping keys that are unique strings. Raises the first problem (a `yaml.MarkedYAMLError`) with its
    position; alias, anchor and depth problems before key problems (a key problem is remembered and
    raised once the whole stream has been checked for the others)."""
    parser = loader(text)
    frames: list[list[Any]] = []  # per open collection: [is_mapping, expecting_key, keys seen]
    key_problem: yaml.constructor.ConstructorError | None = None
    try:
        while parser.check_event():
            event: Any = parser.get_event()
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
                key_problem = _key_problem(parser, event, parent[2])
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
        parser.dispose()
    if key_problem is not None:
        raise key_problem


def _key_problem(parser: Any, event: Any, seen: set[str]) -> yaml.constructor.ConstructorError | None:
    """Why this mapping key is refused (not a string, or a duplicate), or None; records the key."""
    if not isinstance(event, yaml.ScalarEvent):
        return _refuse("mapping keys must be strings, got a collection", event.start_mark)
    tag = event.tag if event.tag not in (None, "!") else parser.resolve(yaml.ScalarNode, event.value, event.implicit)
    if tag != _STR_TAG:
        key = parser.construct_object(yaml.ScalarNode(tag, event.value))
        return _refuse(f"mapping keys must be strings, got {key!r}", event.start_mark)
    if event.value in seen:
        return _refuse(f"duplicate key {event.value!r}", event.start_mark)
    seen.add(event.value)
    return None


def load_documents(text: str, loader: type[Any] = READER) -> list[Any]:
    """Every document of `text`, read with `loader` once the rules hold (`check_events`)."""
    check_events(text, loader)
    return list(yaml.load_all(text, Loader=loader))


def _at(mark: Any) -> str:
    return f"line {mark.line + 1}, column {mark.column + 1}"


def lost_indentation(text: str, line: int) -> str | None:
    """`scope: |` when the 0-based `line` looks like a line of that block scalar's text that lost its
    indentation (the commonest mistake in a hand-edited topic: a pasted paragraph at column 1), else None.

    Why by the text: such a line either ends the block and reads as a key of its own (`Note: ...`, an
    "unknown key") or breaks the parse ("could not find expected ':'"), and in both cases the reader's
    own message points elsewhere. The line belongs to the block when, going up, every line is blank or
    indented deeper than it until a line `key: |` (or `>`) indented no deeper than it."""
    lines = text.splitlines()
    if not 0 < line < len(lines) or not lines[line].strip():
        return None
    own = len(lines[line]) - len(lines[line].lstrip(" "))
    for above in reversed(lines[:line]):
        if not above.strip() or len(above) - len(above.lstrip(" ")) > own:
            continue
        header = _BLOCK_HEADER.match(above)
        return f"{header['key'].strip()}: {header['style']}" if header else None
    return None


def indentation_hint(text: str, line: int) -> str:
    """`lost_indentation` said for people ("" when the line does not look like one)."""
    block = lost_indentation(text, line)
    if block is None:
        return ""
    return f"; is line {line + 1} part of the `{block}` text above it? Indent it like the lines before it"


def key_locations(text: str) -> dict[Location, tuple[int, int]]:
    """Where each key and list item of a (valid) document starts: 0-based (line, column) by location.

    A schema names a field by its location (`models[0].model`); a person edits by line, so a problem the
    schema finds (an unknown key, a wrong type) is said with the line and column of its key."""
    marks: dict[Location, tuple[int, int]] = {}

    def walk(node: Any, here: Location) -> None:
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode):
                    marks.setdefault((*here, key.value), (key.start_mark.line, key.start_mark.column))
                    walk(value, (*here, key.value))
        elif isinstance(node, yaml.SequenceNode):
            for index, item in enumerate(node.value):
                marks.setdefault((*here, index), (item.start_mark.line, item.start_mark.column))
                walk(item, (*here, index))

    try:
        walk(yaml.compose(text, Loader=READER), ())
    except yaml.YAMLError:
        return {}
    return marks


def locator(text: str) -> Callable[[Location], str]:
    """For `records.validation_problems`: the position of a location's key (or of the nearest enclosing
    one), and `indentation_hint` when that key looks like a line that lost its indentation."""
    marks = key_locations(text)

    def where(location: Location) -> str:
        for end in range(len(location), 0, -1):
            if location[:end] in marks:
                line, column = marks[location[:end]]
                return f" (line {line + 1}, column {column + 1}){indentation_hint(text, line)}"
        return ""

    return where


def load_yaml_text(text: str, *, path: str) -> Any:
    """Parse one YAML document strictly; every failure is a one-line BadInput naming `path`, with the line
    and column (and, where the reader noticed only later, the line it was reading: "while scanning a
    simple key")."""
    try:
        documents = load_documents(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" ({_at(mark)})" if mark else ""
        problem = exc.problem or exc.context or "invalid YAML"
        context = exc.context_mark
        if exc.problem and exc.context and context is not None and mark is not None and context.line != mark.line:
            where += f", {exc.context} ({_at(context)})"
        hint = indentation_hint(text, context.line if context is not None else mark.line) if mark else ""
        raise BadInput(f"{problem}{where}{hint}", path=path) from None
    except yaml.YAMLError as exc:
        raise BadInput(f"invalid YAML: {str(exc).splitlines()[0]}", path=path) from None
    except RecursionError:
        raise BadInput("YAML nesting too deep", path=path) from None
    if len(documents) != 1:
        raise BadInput("expected exactly one YAML document", path=path)
    return documents[0]
