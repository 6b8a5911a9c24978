"""Filesystem helpers: atomic writes confined to a root, and the hardened reading of small text files.

Every file the product writes goes through `write_atomic`: a temp file in the same directory, fsync,
then `os.replace`, so a killed process leaves either the old file or the new one, never half of one.
`confined` refuses any path that resolves outside the repository (`..`, absolute paths, symlinks),
so a computed path can never be steered elsewhere. Every small text file a user or an artifact hands
us (pyproject.toml, topic files, reports, call logs) is read with `read_text_strict`.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
import tempfile
from pathlib import Path

from research_dispatch.core.errors import BadInput


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
    tmp = stage_file(path, data)
    try:
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return path


def stage_file(path: Path, data: str | bytes) -> Path:
    """Write `data` to a fresh, fsynced temp file beside `path`, ready to be renamed over it.

    File mode: a file that already exists keeps its mode (a tracked file's mode is part of the commit);
    a new file gets what the umask gives (0644 typically), as any editor or `git checkout` would make
    it. (`mkstemp` would make every file 0600.) The temp file is created with mode 0666 and the kernel
    applies the umask — reading the umask would mean changing it, which is not thread-safe.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    try:
        keep_mode: int | None = stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        keep_mode = None
    fd, tmp = _create_temp(path)
    try:
        if keep_mode is not None:
            os.fchmod(fd, keep_mode)
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return Path(tmp)


def _create_temp(path: Path) -> tuple[int, str]:
    """A new temp file beside `path` (same name pattern as `tempfile.mkstemp`, which the sweep of
    interrupted writes matches), mode 0666 minus the umask."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        tmp = os.path.join(path.parent, f".{path.name}.{secrets.token_hex(6)}.tmp")
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name beside {path}")


def require_writable_dir(path: Path, *, label: str, field: str | None = None) -> Path:
    """Check, before any work, that files can be created in directory `path` (or, if it does not exist
    yet, in its nearest existing ancestor, which must be a directory). Nothing is left behind.
    `BadInput` names `label` (the option or setting) and the reason otherwise."""
    probe = path
    while not probe.exists() and not probe.is_symlink() and probe.parent != probe:
        probe = probe.parent
    try:
        if not probe.is_dir():
            raise NotADirectoryError(20, f"{probe} is not a directory")
        with tempfile.TemporaryFile(dir=probe):
            pass
    except OSError as exc:
        raise BadInput(f"cannot write to {str(path)!r}: {exc.strerror or exc}", path=label, field=field) from None
    return path


def append_line(path: Path, line: str) -> None:
    """Append one line (used for traces, which are build artefacts, not committed files)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as handle:
        handle.write(line.rstrip("\n") + "\n")


def read_text_strict(path: Path, *, display: str, max_bytes: int, allow_empty: bool = False) -> str:
    """Read a small UTF-8 text file, refusing huge, binary or non-UTF-8 input, and anything that is not
    a regular file: a FIFO would block for ever, `/dev/zero` never ends, a directory is not text.

    The file is opened non-blocking and checked with `fstat` on the open descriptor, so the check and
    the read concern the same file; at most `max_bytes + 1` bytes are ever read. `allow_empty`: an
    empty file is text (an evidence file of a report that cites nothing), not an error.
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise BadInput(f"cannot read: {exc.strerror}", path=display) from None
    info = os.fstat(fd)
    problem = ("is a directory, not a file" if stat.S_ISDIR(info.st_mode)
               else "is not a regular file (a FIFO, socket or device)" if not stat.S_ISREG(info.st_mode)
               else f"file is {info.st_size} bytes; the limit is {max_bytes}" if info.st_size > max_bytes
               else None)
    if problem:
        os.close(fd)
        raise BadInput(problem, path=display)
    with os.fdopen(fd, "rb") as handle:
        try:
            raw = handle.read(max_bytes + 1)
        except OSError as exc:
            raise BadInput(f"cannot read: {exc.strerror}", path=display) from None
    if len(raw) > max_bytes:
        raise BadInput(f"file is larger than the limit of {max_bytes} bytes", path=display)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadInput(f"not valid UTF-8 (byte {exc.start})", path=display) from None
    if "\x00" in text:
        raise BadInput("contains NUL bytes", path=display)
    if not text.strip() and not allow_empty:
        raise BadInput("file is empty", path=display)
    return text.lstrip("\ufeff")


REPOSITORY_MARKERS = (".git", "pyproject.toml")
"""What marks a repository's top level when a command starts in a subdirectory of it."""


def find_repository(start: Path) -> Path:
    """The repository a command run in `start` works on, found as git finds its own: `start` or the
    nearest directory above it that holds `.git` or a `pyproject.toml` (so `check` from `topics/` finds
    the review; a review in a subfolder of a larger repository, with its own pyproject, is found there).
    Nothing above: `start` itself, as before."""
    start = start.resolve()
    for directory in (start, *start.parents):
        if any((directory / marker).exists() for marker in REPOSITORY_MARKERS):
            return directory
    return start
