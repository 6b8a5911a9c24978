"""Which commit of research-dispatch this is: what `--version` prints and what `init` pins to.

Three sources, best first: the `_build_info` module the build writes into every wheel and sdist
(setup.py), the commit pip recorded when it installed from a git URL (PEP 610 `direct_url.json`, read
by `adopt.init`), and — for an editable install running from a checkout — that checkout's HEAD. A
checkout's HEAD is shown by `--version` but never pinned by `init` (it may be a local commit nobody else
has); only a built package's commit is.
"""

from __future__ import annotations

import importlib
import re
import subprocess
from pathlib import Path

_FULL_SHA = re.compile(r"[0-9a-f]{40}")


def built_commit() -> str | None:
    """The commit the build recorded in the package, or None (an editable install, an unknown build)."""
    try:
        module = importlib.import_module("research_dispatch._build_info")
    except ImportError:
        return None
    commit = getattr(module, "COMMIT", None)  # generated file: its one name, checked like any input
    return commit if isinstance(commit, str) and _FULL_SHA.fullmatch(commit) else None


def checkout_commit() -> str | None:
    """HEAD of the git checkout the package runs from (editable install), else None."""
    root = Path(__file__).resolve().parents[3]  # core/ of the package in scripts/ of the checkout
    if not (root / ".git").exists() or not (root / "pyproject.toml").is_file():
        return None
    try:
        done = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    commit = done.stdout.strip()
    return commit if done.returncode == 0 and _FULL_SHA.fullmatch(commit) else None


def version_line(version: str) -> str:
    """`research-dispatch X.Y.Z (commit <sha>)`, saying where the commit comes from when not built in."""
    built = built_commit()
    if built is not None:
        return f"research-dispatch {version} (commit {built})"
    checkout = checkout_commit()
    if checkout is not None:
        return f"research-dispatch {version} (git checkout at {checkout})"
    return f"research-dispatch {version} (commit unknown)"
