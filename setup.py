"""The build hook that records the git commit in the package (everything else is in pyproject.toml).

Why: `research-dispatch init` pins the adopter's workflows to the full commit of the research-dispatch
it runs, and `--version` says which commit that is. A wheel or sdist does not know its commit by itself
(only an install from a git URL records one, PEP 610), so the build writes it into the package:

* building from a git checkout (`python -m build`, `pip wheel .`), the commit is `git rev-parse HEAD` of
  the checkout — only when this directory is the checkout's top level, never a parent repository's;
* the sdist carries the generated `research_dispatch/_build_info.py`, so a wheel built from the sdist
  (no `.git` there) keeps the commit it was cut from;
* with neither, nothing is written and the package says "commit unknown" (`research_dispatch.core.build_info`).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

ROOT = Path(__file__).resolve().parent
INFO = Path("research_dispatch") / "_build_info.py"
SOURCE_INFO = ROOT / "scripts" / INFO


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, timeout=30,
                              check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def checkout_commit() -> str | None:
    """HEAD of the git checkout whose top level is this directory, else None."""
    top = _git("rev-parse", "--show-toplevel")
    if top is None or Path(top).resolve() != ROOT:
        return None
    commit = _git("rev-parse", "HEAD")
    return commit if commit and len(commit) == 40 else None


def info_text(commit: str) -> str:
    return ('"""Written by the build (setup.py): the git commit this package was built from."""\n\n'
            f'COMMIT = "{commit}"\n')


def write_info(target: Path) -> None:
    """The checkout's commit into `target`; from an sdist the file is already there and is kept."""
    commit = checkout_commit()
    if commit is not None:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(info_text(commit), encoding="utf-8")


class BuildPy(build_py):
    def run(self) -> None:
        super().run()
        if not self.editable_mode:  # an editable install reads the checkout itself (core/build_info.py)
            write_info(Path(self.build_lib) / INFO)


class Sdist(sdist):
    def make_release_tree(self, base_dir: str, files: list[str]) -> None:
        super().make_release_tree(base_dir, files)
        write_info(Path(base_dir) / "scripts" / INFO)


setup(cmdclass={"build_py": BuildPy, "sdist": Sdist})
