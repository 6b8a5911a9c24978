"""Topic files (`topics/NN-<id>.yaml`, FIXED fields in `settings.Topic`): where they are, how each is
read, the checks across files, the selection a command asks for, and the per-topic defaults.

A topic file is input a user edits by hand: each is read with the hardened text reader and the strict
YAML rules (`core/strictyaml.py`: no aliases, no duplicate keys, bounded size and nesting, strict
UTF-8) and validated by the schema, and every problem is one `BadInput` naming the file and the field.
`check_topics` collects every problem at once (the `check` command); `load_topics` raises the first.
The file name gives the report stem (`NN-<id>`): report paths are computed from it, never read.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from research_dispatch.config.settings import Budget, ModelRoute, SearchSettings, Settings, Topic, WordBand
from research_dispatch.core.errors import BadInput
from research_dispatch.core.fsio import read_text_strict
from research_dispatch.core.records import ValidationProblems, validation_problems
from research_dispatch.core.strictyaml import load_yaml_text, locator

TOPIC_FILE_RE = re.compile(r"^(?P<nn>\d{2})-(?P<id>[a-z0-9][a-z0-9.-]*)\.ya?ml$")
MAX_TOPIC_BYTES = 64 * 1024


@dataclass(frozen=True)
class TopicFile:
    """A validated topic with where it came from and the file stem reports are named after."""

    topic: Topic
    path: Path  # absolute
    relpath: str  # as shown to users, e.g. topics/02-diloco-family.yaml
    nn: str
    raw_sha256: str  # the file's bytes: what reports written before 0.2 hashed (`leg.execute.leg_input_hashes`)
    content_sha256: str  # the topic's meaning: its validated fields in canonical JSON (`content_hash`)

    @property
    def stem(self) -> str:
        return f"{self.nn}-{self.topic.id}"

    def report_stem(self, route: ModelRoute) -> str:
        """Computed report stem: NN-id, or NN-id.author-name when the topic has several models."""
        if len(self.topic.models) == 1:
            return self.stem
        return f"{self.stem}.{route.author}-{route.name}"


def load_topic_file(path: Path, *, repo: Path) -> TopicFile:
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
        raise ValidationProblems(display, validation_problems(exc, Topic, where=locator(text))) from None
    if topic.id != match.group("id"):
        raise BadInput(f"id {topic.id!r} does not match the file name ({match.group('id')!r})",
                       path=display, field="id")
    return TopicFile(topic=topic, path=path.resolve(), relpath=display, nn=match.group("nn"),
                     raw_sha256=hashlib.sha256(text.encode("utf-8")).hexdigest(), content_sha256=content_hash(topic))


def content_hash(topic: Topic) -> str:
    """The hash of what a topic says, not how its file spells it: line endings, comments, quoting, key
    order, flow or block style and omitted defaults change nothing, so a Windows checkout (CRLF) and CI
    agree and a comment-only edit pays for no leg again. The validated fields, defaults filled in, as
    canonical JSON."""
    canonical = json.dumps(topic.model_dump(mode="json"), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


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
    if not (repo / settings.topics_dir).is_dir():
        problems.append(BadInput(f"there is no {settings.topics_dir}/ folder here: run `research-dispatch init` to set "
                                 "this repository up (the configuration, an example topic, the workflows)",
                                 path=settings.topics_dir + "/"))
    elif not paths:
        problems.append(BadInput("no topic files (expected NN-<id>.yaml files; `research-dispatch init` writes an "
                                 "example)", path=settings.topics_dir + "/"))
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
