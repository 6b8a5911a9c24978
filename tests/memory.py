"""Peak memory of a process, measured so that a child of a big test worker is not blamed for it.

`ru_maxrss` (from `getrusage` or `wait4`) is the wrong figure for a child: Linux carries the parent's
resident high-water mark over fork+exec into the child's `maxrss`, so a CLI started by a pytest worker
that has grown to 400 MB reports 400 MB however little it uses itself. `VmHWM` in `/proc/<pid>/status`
belongs to the process's own address space, which `exec` replaces: it is the peak since exec.
"""

from __future__ import annotations

from pathlib import Path


def peak_rss_mb(pid: int | str = "self") -> float | None:
    """The process's peak resident memory since its exec, in MB (None once it has gone, or off Linux)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text(encoding="ascii", errors="replace").splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        return None
    return None
