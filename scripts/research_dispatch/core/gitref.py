"""Branch names by git's own rules.

A cycle id becomes part of a branch name (`<pr.branch_prefix><cycle>`), and a name git refuses would
only surface when publishing — after every leg was paid for. So the name is checked up front with the
same rules git applies (`git check-ref-format`), not with a copy of them that could drift: `abc.` and
`a.lock` pass a plain character check but are refused by git. Without a git executable the checker
falls back to the documented rules (git-check-ref-format(1)), which is what git would say too.
"""

from __future__ import annotations

import os
import re
import subprocess

_FORBIDDEN = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]|\.\.|@\{|//")


def _documented_rules(name: str) -> bool:
    """git-check-ref-format(1) for `refs/heads/<name>`, for a machine without git."""
    if not name or name == "@" or _FORBIDDEN.search(name) or name.startswith("/") or name.endswith(("/", ".")):
        return False
    return all(part and not part.startswith(".") and not part.endswith(".lock") for part in name.split("/"))


def valid_branch_name(name: str) -> bool:
    """True when git accepts `refs/heads/<name>` as a branch."""
    if name.startswith("-"):  # an option to git, and refused by `git branch` anyway
        return False
    try:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C"}  # no GIT_* can change the rules
        done = subprocess.run(["git", "check-ref-format", f"refs/heads/{name}"], capture_output=True, check=False,
                              timeout=30, env=env)
    except (FileNotFoundError, subprocess.TimeoutExpired):
        return _documented_rules(name)
    return done.returncode == 0

