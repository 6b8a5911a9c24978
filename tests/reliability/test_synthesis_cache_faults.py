"""The synthesis cache only saves money (issue 31, the low findings): it can neither end `synthesize` after
the calls it paid for, nor hang it, nor fill its memory.

* A cache entry that cannot be written (a full disk, a read-only build directory) is one warning; the
  synthesis is written, and the next run replays the paid answers from the claims ledger.
* A FIFO, a directory or a 300 MB file where an entry belongs is a damaged entry: refused by name
  without being read (a FIFO would block for ever, a huge file would be read whole), and the answer is
  asked for again.

`synthesize` runs as a user runs it (a fresh interpreter: `synthesize_cli`, or in-process with
the OS-layer fault shim of tests/faultshim.py where the disk is the point).
"""
# ruff: noqa: F811 - the imported fixtures are the tests' arguments

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from research_dispatch.synthesis.cache import MAX_ENTRY_BYTES
from tests.faultshim import Faults
from tests.synthesis.conftest import planted, run_synthesis, synth_env, synthesize_cli  # noqa: F401

pytestmark = pytest.mark.slow

reliability = pytest.mark.reliability


@reliability(area="crash", case="the synthesis cache cannot be written (disk full under build/synthesis-cache)",
             expect="one warning naming the cache, the synthesis is written with every paid answer, exit 0; the next "
                    "run replays them from the claims ledger with 0 model calls")
def test_a_cache_that_cannot_be_written_is_a_warning(planted: Path, run_synthesis: Any) -> None:
    with Faults([planted / "build" / "synthesis-cache"], "enospc", 1):
        result = run_synthesis(planted)
    assert result.llm_calls > 0 and (planted / "framework" / "claims.json").exists()
    warnings = [w for w in result.warnings if "could not write the synthesis cache" in w]
    assert len(warnings) == 1 and "No space left on device" in warnings[0], result.warnings
    assert not list((planted / "build" / "synthesis-cache").rglob("*.json"))
    again = run_synthesis(planted)
    assert again.llm_calls == 0 and again.cost_usd == 0


@reliability(area="input", case="a synthesis cache entry that is {id}",
             expect="refused by name without being read (never a hang, never read whole): a warning naming the "
                    "entry, the answer asked for again (1 extraction call), exit 0")
@pytest.mark.parametrize("kind", ["a FIFO", "a directory", "larger than the entry limit"])
def test_a_cache_entry_that_is_not_a_small_file(planted: Path, synth_env: dict[str, str], gateway: Any,
                                                kind: str) -> None:
    assert synthesize_cli(planted, synth_env).code == 0
    (planted / "framework" / "claims.json").unlink()  # no replay from the ledger: the cache is the only copy
    entry = sorted((planted / "build" / "synthesis-cache" / "extract").glob("*.json"))[0]
    entry.unlink()
    if kind == "a FIFO":
        os.mkfifo(entry)
    elif kind == "a directory":
        entry.mkdir()
    else:
        with entry.open("wb") as handle:  # sparse: the size is there, the disk is not used
            handle.truncate(MAX_ENTRY_BYTES + 1)
    gateway.reset()
    result = synthesize_cli(planted, synth_env)
    assert result.code == 0, result.stderr
    assert "Traceback" not in result.stderr and "internal error" not in result.stdout + result.stderr
    [warning] = [line for line in result.stdout.splitlines() if "damaged synthesis cache entry" in line]
    assert f"build/synthesis-cache/extract/{entry.name}" in warning
    assert {"a FIFO": "not a regular file", "a directory": "is a directory",
            "larger than the entry limit": "the limit is"}[kind] in warning, warning
    assert "LLM calls: 1 (1 extraction, 5 cached" in result.stdout
