"""One preflight before the first paid call: everything that could refuse the work later, checked first.

`research` and `run` call `preflight` before any leg spends money; the workflow's plan job makes the same
checks through `check` and `plan --github-output` (which run on a checkout without keys). A leg is
paid for by the minute and the token, so a refusal that can only come after it — a report path
another leg also writes, a directory git cannot commit, a cycle git refuses as a branch name, an export
folder that is the repository itself, a symbolic link in a path the leg writes, a pull request of the
cycle that was closed — is money spent on nothing. Each of these is exit 2 here, one line naming the
file (or option) and the field.

The order: what can be known locally first (the plan, the names, the keys being set, the paths), then
what needs a service (the gateway about the plan's models, `run/online.py`; the remote and the pull
requests, `publish/readiness.py`), so every command that pays makes all of them, in one place.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from research_dispatch.config.plan import Leg, refresh_branch, require_unique_paths
from research_dispatch.config.settings import Settings
from research_dispatch.core.errors import BadInput
from research_dispatch.core.fsio import confined, require_writable_dir
from research_dispatch.leg.execute import require_keys
from research_dispatch.publish.readiness import preflight as publish_preflight
from research_dispatch.run.collect import leg_files
from research_dispatch.run.online import require_models


@dataclass(frozen=True)
class Work:
    """What a command is about to do: the facts its checks need."""

    cycle: str
    legs: list[Leg]  # the legs it will run
    planned: list[Leg]  # every leg of the plan (report paths must be unique across all of them)
    synthesize: bool = False
    publish: bool = False
    push: bool = False
    export_dir: Path | None = None


def preflight(repo: Path, settings: Settings, work: Work, env: Mapping[str, str]) -> None:
    """Every check before the first paid call (see the module docstring); raises `BadInput` (exit 2) or
    `PublishError` (exit 1: the remote does not answer, someone else committed to the branch)."""
    require_unique_paths(work.planned, settings)
    refresh_branch(settings, work.cycle)
    require_keys(env, settings, work.legs)
    require_output_paths(repo, settings, work.legs, synthesize=work.synthesize)
    if work.export_dir is not None:
        require_export_target(repo, settings, work.export_dir)
    require_models(settings, work.legs, env)  # every model exists and takes its calls (asks the gateway)
    if work.publish:
        publish_preflight(repo, settings, env, push=work.push, cycle=work.cycle)


def _settings_of(settings: Settings, rel: str) -> str:
    """The setting a computed path comes from (named in a refusal)."""
    for name in ("build_dir", "research_dir", "framework_dir"):
        root = getattr(settings, name)
        if rel == root or rel.startswith(root + "/"):
            return name
    return "methodology_path"


def output_paths(settings: Settings, legs: list[Leg], *, synthesize: bool) -> list[str]:
    """Every repository-relative file the work writes: each leg's files, and the synthesis' when it runs."""
    paths = [rel for leg in legs for rel in leg_files(leg, settings)]
    return paths + (settings.synthesis_relpaths() if synthesize else [])


def require_output_paths(repo: Path, settings: Settings, legs: list[Leg], *, synthesize: bool) -> None:
    """Every path the work writes: no symbolic link on the way (the write would land wherever it points,
    and `confined` would refuse it only after the leg was paid), inside the repository, and each
    directory writable. The first problem is exit 2 naming the path and its setting."""
    root = repo.resolve()
    checked: set[str] = set()
    for rel in output_paths(settings, legs, synthesize=synthesize):
        parts = rel.split("/")
        for depth in range(1, len(parts) + 1):
            prefix = "/".join(parts[:depth])
            if prefix in checked:
                continue
            checked.add(prefix)
            path = repo / prefix
            if path.is_symlink():
                raise BadInput(f"is a symbolic link (to {os.readlink(path)!r}); the files of this leg or synthesis "
                               "are written at computed paths inside the repository, never through a link: replace "
                               "it with a plain directory or file", path=prefix, field=_settings_of(settings, rel))
        confined(root, rel)
    parents = {str(Path(rel).parent) for rel in output_paths(settings, legs, synthesize=synthesize)}
    parents |= {settings.build_dir, settings.research_dir} | ({settings.framework_dir} if synthesize else set())
    # the configured directories first (`build`, not `build/legs`, is what the user set and can fix)
    for relative in sorted(parents, key=lambda rel: (rel.count("/"), rel)):
        require_writable_dir(repo / relative, label=relative, field=_settings_of(settings, relative))


def require_export_target(repo: Path, settings: Settings, export_dir: Path) -> None:
    """`research --export DIR` copies each leg's files to DIR/<their repository path>: DIR must be a
    writable folder that is neither the repository itself (each file would be copied onto itself) nor
    inside a directory the refresh reads or commits (the copies would be taken for reports, topics or
    the synthesis)."""
    target = export_dir.resolve()
    root = repo.resolve()
    if target == root:
        raise BadInput("is the repository itself: each leg's files would be copied onto themselves; give a "
                       "folder of its own (the workflow uses leg-out)", path="--export")
    for name in ("research_dir", "framework_dir", "topics_dir"):
        inside = (root / getattr(settings, name)).resolve()
        if target == inside or inside in target.parents:
            raise BadInput(f"is inside {getattr(settings, name)}/ ({name}): the copies would be read as the "
                           "repository's own files; give a folder outside it (the workflow uses leg-out)",
                           path="--export")
    require_writable_dir(export_dir, label="--export")
