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

from typing import Any

import yaml

from research_dispatch.core.errors import BadInput

MAX_YAML_DEPTH = 12
READER: type[Any] = yaml.CSafeLoader if getattr(yaml, "__with_libyaml__", False) else yaml.SafeLoader
"""The loader documents are read with: libyaml's where PyYAML has it, else PyYAML's own."""
_STR_TAG = "tag:yaml.org,2002:str"


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


def load_yaml_text(text: str, *, path: str) -> Any:
    """Parse one YAML document strictly; every failure is a one-line BadInput naming `path`."""
    try:
        documents = load_documents(text)
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
