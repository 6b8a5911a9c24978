"""The workflows `research-dispatch init` writes into another repository, for the workflow tests.

They are generated here in-process (the same templates the wheel ships; tests/adopt checks that the
wheel's `init` writes the same bytes), pinned to a fixed commit, so that the invariants, the linters and
the end-to-end harness hold the adopter's files to the same rules as this repository's.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from research_dispatch.adopt.init import CALLER_WORKFLOWS, UPSTREAM, init_repository

ADOPTER_REF = "5e7a6c1d2b3f4a5968778695a4b3c2d1e0f1a2b3"  # any full commit sha: the pin init is given
ADOPTER_FILES = tuple(Path(p).name for p in CALLER_WORKFLOWS)
REUSABLE = f"{UPSTREAM}/.github/workflows/research-refresh.yml"


def git_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update({"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"})
    return env


def scaffold(target: Path, ref: str = ADOPTER_REF) -> Path:
    """An empty git repository at `target`, set up by `init --ref <ref>`; returns it."""
    target.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", "-b", "main", str(target)], check=True, env=git_env())
    init_repository(target, ref=ref)
    return target
