"""Crash safety at the lowest level: a process killed while writing leaves the old file or the new one.

Every file the product writes goes through `fsio.write_atomic` (temp file in the same directory,
fsync, rename). Here a child process rewrites one 2 MB file in a loop, alternating two payloads, and is
killed with SIGKILL at an arbitrary moment, several times over: the file must always hold one whole
payload. (The leg-level and run-level kill cases — a leg killed during a gateway call, then resumed —
run the real `run` command; see the tests referenced in docs/RELIABILITY.md.)
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

reliability = pytest.mark.reliability
SIZE = 2 * 1024 * 1024

CHILD = """
import sys
from pathlib import Path
from research_dispatch.core.fsio import write_atomic
target = Path(sys.argv[1])
payloads = [b"A" * {size}, b"B" * {size}]
write_atomic(target, payloads[0])
print("ready", flush=True)
n = 0
while True:
    n += 1
    write_atomic(target, payloads[n % 2])
""".replace("{size}", str(SIZE))


@reliability(area="crash", case="SIGKILL while a file is being rewritten (write_atomic)",
             expect="after 8 kills at random moments the file always holds one whole payload (old or new), never "
                    "a mix or a truncation")
def test_sigkill_during_write_leaves_a_whole_file(tmp_path: Path) -> None:
    target = tmp_path / "research" / "02-diloco-family.md"
    target.parent.mkdir()
    rng = random.Random(6)
    for _ in range(8):
        child = subprocess.Popen([sys.executable, "-c", CHILD, str(target)], stdout=subprocess.PIPE, text=True)
        try:
            assert child.stdout is not None and child.stdout.readline().strip() == "ready"
            # Let it rewrite for a moment (each write is a few ms), then kill it wherever it is.
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(timeout=rng.uniform(0.01, 0.15))
            os.kill(child.pid, signal.SIGKILL)
            child.wait(timeout=30)
        finally:
            if child.poll() is None:
                child.kill()
            if child.stdout is not None:
                child.stdout.close()
        data = target.read_bytes()
        assert len(data) == SIZE and data in (b"A" * SIZE, b"B" * SIZE)
    leftovers = [p.name for p in target.parent.iterdir() if p != target]
    assert all(name.startswith(f".{target.name}.") and name.endswith(".tmp") for name in leftovers), leftovers
