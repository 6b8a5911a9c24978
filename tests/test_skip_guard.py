"""The skip guard (tests/skipguard.py) and the rule that tests import our own modules plainly.

The guard is proven from the outside: a separate `pytest` process runs tiny temporary test files with the
guard loaded as a plugin (`-p tests.skipguard`), plainly and under pytest-xdist as `make test` runs it, and
its exit code and summary are read.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.skipguard import ALLOWLIST, read_allowlist

PASSING = "def test_passes():\n    assert True\n"
SKIPPED = "import pytest\n\n\ndef test_skipped():\n    pytest.skip('the tool is gone')\n"
MARKED = "import pytest\n\n\n@pytest.mark.skip(reason='later')\ndef test_marked():\n    pass\n"
MODULE_SKIP = ("import pytest\n\npytest.importorskip('research_dispatch.not_landed_yet')\n\n\n"
               "def test_never():\n    pass\n")
XFAIL = "import pytest\n\n\n@pytest.mark.xfail(reason='known bug')\ndef test_xfail():\n    assert False\n"


def run_pytest(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """A fresh `pytest` in `folder` (its own rootdir, no ini file) with only the guard as our plugin."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("PYTEST_ADDOPTS", None)
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "tests.skipguard", "-p", "no:cacheprovider",
                           "--rootdir", str(folder), "-q", *args], cwd=folder, env=env, capture_output=True,
                          text=True, timeout=180, check=False)


def write(folder: Path, **files: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / f"{name}.py").write_text(text, encoding="utf-8")
    return folder


@pytest.mark.slow
def test_a_deliberately_skipped_test_fails_the_run(tmp_path: Path) -> None:
    folder = write(tmp_path / "suite", test_ok=PASSING, test_gone=SKIPPED)
    done = run_pytest(folder)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 passed, 1 skipped" in done.stdout
    assert "skip guard" in done.stdout and "test_gone.py::test_skipped: the tool is gone" in done.stdout


@pytest.mark.slow
def test_under_xdist_every_kind_of_skip_fails_the_run(tmp_path: Path) -> None:
    """`-n 2 --dist loadfile`, as `make test`: skips happen in the workers, the controller fails the run."""
    folder = write(tmp_path / "suite", test_ok=PASSING, test_gone=SKIPPED, test_marked=MARKED,
                   test_module=MODULE_SKIP, test_xfail=XFAIL)
    done = run_pytest(folder, "-n", "2", "--dist", "loadfile")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "4 skipped test(s) not listed" in done.stdout, done.stdout
    for line in ("test_gone.py::test_skipped: the tool is gone", "test_marked.py::test_marked: later",
                 "test_module.py: could not import 'research_dispatch.not_landed_yet'",
                 "test_xfail.py::test_xfail: xfail: known bug"):
        assert line in done.stdout, (line, done.stdout)


@pytest.mark.slow
def test_listed_skips_pass_and_the_count_cannot_grow(tmp_path: Path) -> None:
    folder = write(tmp_path / "suite", test_ok=PASSING, test_gone=SKIPPED)
    allowlist = tmp_path / "allowed.txt"
    allowlist.write_text("# the tool is not installed offline\ntest_gone.py::test_skipped\n", encoding="utf-8")
    assert run_pytest(folder, "--skip-allowlist", str(allowlist), "-n", "2").returncode == 0
    write(folder, test_more=SKIPPED.replace("test_skipped", "test_also_skipped"))  # one more skip
    done = run_pytest(folder, "--skip-allowlist", str(allowlist), "-n", "2")
    assert done.returncode == 1, done.stdout
    assert "1 skipped test(s) not listed" in done.stdout and "test_more.py::test_also_skipped" in done.stdout


@pytest.mark.slow
def test_a_failing_run_keeps_its_own_exit_code(tmp_path: Path) -> None:
    folder = write(tmp_path / "suite", test_bad="def test_bad():\n    assert False\n", test_gone=SKIPPED)
    done = run_pytest(folder)
    assert done.returncode == 1 and "1 failed, 1 skipped" in done.stdout
    assert run_pytest(folder, "--collect-only").returncode == 0  # nothing ran, nothing skipped


def test_every_allowed_skip_names_a_test_that_exists() -> None:
    """A stale entry would let a future test of that name skip unnoticed."""
    entries = read_allowlist(ALLOWLIST)
    assert entries, "the allow-list is empty: drop this test or the file"
    for entry in sorted(entries):
        path, _, name = entry.partition("::")
        source = (ROOT / path).read_text(encoding="utf-8")
        function = name.split("[", 1)[0]
        assert f"def {function}(" in source, entry


def _importorskips(path: Path) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "importorskip":
            target = node.args[0] if node.args else None
            name = target.value if isinstance(target, ast.Constant) and isinstance(target.value, str) else "?"
            found.append((node.lineno, name))
    return found


@pytest.mark.slow
def test_no_test_importorskips_our_own_modules() -> None:
    """An import error of ours must fail, not skip: `importorskip` is for optional third-party packages only
    (and a name we cannot read statically counts as ours)."""
    ours = [f"{path.relative_to(ROOT)}:{line}: {name}" for path in sorted((ROOT / "tests").rglob("*.py"))
            for line, name in _importorskips(path)
            if name == "?" or name.split(".")[0] in ("research_dispatch", "tests")]
    assert ours == []


@pytest.mark.parametrize("name", ["research_dispatch.fake", "yaml"])
def test_the_importorskip_scan_reads_the_module_name(tmp_path: Path, name: str) -> None:
    path = tmp_path / "test_x.py"
    path.write_text(f"import pytest\n\n\ndef test_x():\n    pytest.importorskip({name!r})\n", encoding="utf-8")
    assert _importorskips(path) == [(5, name)]
