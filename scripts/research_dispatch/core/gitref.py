"""The one rule for the names of branches (and tags) the product makes, takes or writes.

A cycle id becomes part of a branch name (`<pr.branch_prefix><cycle>`), `pr.base` and `publish --branch`
name branches, `init` writes the repository's default branch and a pinned tag into files, and a name git
refuses would only surface when publishing — after every leg was paid for. So every such name is checked
up front by this one function, with the rules git itself applies (`git check-ref-format`), not with a
copy of them that could drift: `abc.`, `a.lock` and `a/.b/` pass a plain character check but are
refused by git. Without a git executable the documented rules (git-check-ref-format(1)) stand in, which
is what git would say too.

On top of git's rules, a name is at most 200 characters of letters, digits, `.`, `_`, `/` and `-`,
starting with a letter or digit: the product writes these names into TOML, YAML, commit messages and
command lines, where such a name needs no quoting and can never be read as an option.
"""

from __future__ import annotations

import functools
import os
import re
import subprocess

_SAFE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]{0,199}")
_FORBIDDEN = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]|\.\.|@\{|//")


def _documented_rules(name: str) -> bool:
    """git-check-ref-format(1) for `refs/heads/<name>`, for a machine without git."""
    if not name or _FORBIDDEN.search(name) or name.startswith("/") or name.endswith(("/", ".")):
        return False
    return all(part and not part.startswith(".") and not part.endswith(".lock") for part in name.split("/"))


@functools.lru_cache(maxsize=256)
def valid_branch_name(name: str) -> bool:
    """True when `name` is a branch (or tag: the same rules) git accepts as `refs/heads/<name>`, in the
    characters above."""
    if not _SAFE.fullmatch(name):
        return False
    try:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C"}  # no GIT_* can change the rules
        done = subprocess.run(["git", "check-ref-format", f"refs/heads/{name}"], capture_output=True, check=False,
                              timeout=30, env=env)
    except (FileNotFoundError, subprocess.TimeoutExpired):
        return _documented_rules(name)
    return done.returncode == 0


RULE = "a branch name git accepts (git check-ref-format), of letters, digits, '.', '_', '/' and '-'"
"""The rule in words, for the messages that refuse a name."""
