"""The rule scripts/dev/test_share.py counts by: which process a test starts is the research-dispatch CLI."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import ROOT


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("test_share_script", ROOT / "scripts" / "dev" / "test_share.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


share = _load()


@pytest.mark.parametrize("argv,expected", [
    (["/venv/bin/research-dispatch", "check"], True),
    ([sys.executable, "-m", "research_dispatch", "verify"], True),
    ([sys.executable, "-c", "from research_dispatch.cli import main; main()", "run"], True),
    ([sys.executable, "-c", "MEASURE", sys.executable, "-m", "research_dispatch", "research", "x"], True),
    (["bash", "-c", "research-dispatch plan --github-output"], True),
    ([sys.executable, "-m", "research_dispatch.fake", "serve"], False),
    ([sys.executable, "-m", "pytest", "tests"], False),
    (["bash", "-c", "echo research-dispatch-demo"], False),
    (["git", "commit", "-m", "research-dispatch run"], False),
])
def test_which_argv_is_the_cli(argv: list[str], expected: bool) -> None:
    assert share.is_cli(argv) is expected


def test_a_workflow_step_script_that_calls_the_cli_counts(tmp_path: Path) -> None:
    """tests/workflows/runner_harness.py runs each `run:` step as `bash ... -eo pipefail SCRIPT`."""
    script = tmp_path / "step.sh"
    script.write_text("set -e\nresearch-dispatch synthesize --github-summary\n", encoding="utf-8")
    assert share.is_cli(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)])
    script.write_text("pip install --no-deps ./.research-dispatch\n", encoding="utf-8")
    assert not share.is_cli(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)])
    assert share.is_cli("research-dispatch --version", shell=True)
