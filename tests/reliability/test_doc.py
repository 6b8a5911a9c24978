"""docs/RELIABILITY.md lists exactly the current reliability cases, so the table cannot silently rot."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.slow


def test_reliability_doc_lists_the_current_cases() -> None:
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "dev" / "reliability_report.py"), "--check"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "up to date" in proc.stdout
