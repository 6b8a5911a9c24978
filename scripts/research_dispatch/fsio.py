"""Filesystem helpers: atomic writes confined to a root.

Every file the product writes goes through `write_atomic`: a temp file in the same directory, fsync,
then `os.replace`, so a killed process leaves either the old file or the new one, never half of one.
`confined` refuses any path that resolves outside the repository (`..`, absolute paths, symlinks),
so a computed path can never be steered elsewhere.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from research_dispatch.errors import BadInput


def confined(root: Path, path: str | Path) -> Path:
    """Return the resolved path, refusing anything that would land outside root.

    Relative paths may not contain `..`; absolute paths must already lie under root. Symlinks are
    resolved before the check, so a link inside the tree cannot point the write elsewhere.
    """
    candidate = Path(path)
    if not candidate.is_absolute() and ".." in candidate.parts:
        raise BadInput(f"refusing path outside the repository: {path}")
    root_resolved = root.resolve()
    target = (candidate if candidate.is_absolute() else root_resolved / candidate).resolve()
    if target != root_resolved and root_resolved not in target.parents:
        raise BadInput(f"refusing path outside the repository: {path}")
    return target


def write_atomic(path: Path, data: str | bytes, *, root: Path | None = None) -> Path:
    """Write `data` to `path` atomically (same-directory temp file + fsync + rename)."""
    if root is not None:
        path = confined(root, path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return path


def append_line(path: Path, line: str) -> None:
    """Append one line (used for traces, which are build artefacts, not committed files)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as handle:
        handle.write(line.rstrip("\n") + "\n")
