"""Fixtures for adoption: the wheel and sdist built once per session, a fresh virtualenv outside the
checkout with the wheel installed, and running the CLI as a user does (a fresh interpreter per command).

Why the fresh venv borrows its dependencies: installing openai, pydantic, PyGithub, mcp and the rest into
a new venv would hit the package index on every test session (slow, and flaky offline). The fresh venv
gets research-dispatch from the wheel only (`pip install --no-index --no-deps`), and a `.pth` line that
appends the dev venv's site-packages directory to `sys.path` for the third-party packages. A `.pth` line
adds a directory without processing the `.pth` files inside it, so the dev venv's editable install (a
`.pth` pointing at this checkout's scripts/) is NOT active: `research_dispatch` can only come from the
wheel, and a test asserts it does. The wheel-using tests live in one file so that pytest-xdist's
`--dist loadfile` builds the wheel once.
"""

from __future__ import annotations

import os
import site
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import ROOT


def git_env(home: Path | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update({"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "Ada Adopter",
                "GIT_AUTHOR_EMAIL": "ada@example.invalid", "GIT_COMMITTER_NAME": "Ada Adopter",
                "GIT_COMMITTER_EMAIL": "ada@example.invalid"})
    if home is not None:
        env["HOME"] = str(home)
    return env


def git(cwd: Path, *args: str) -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, env=git_env(), capture_output=True, text=True, check=False)
    assert proc.returncode == 0, f"git {' '.join(args)}: {proc.stderr}"
    return proc.stdout.strip()


def empty_repository(path: Path, branch: str = "main") -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git(path.parent, "init", "-q", "-b", branch, str(path))
    return path


def snapshot(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under root except .git: its bytes and mtime (ns), to prove nothing was touched."""
    return {p.relative_to(root).as_posix(): (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(root.rglob("*"))
            if p.is_file() and ".git" not in p.relative_to(root).parts}


@dataclass(frozen=True)
class Dist:
    wheel: Path
    sdist: Path
    log: str


@dataclass(frozen=True)
class FreshVenv:
    """A virtualenv outside the checkout with the wheel installed."""

    root: Path
    home: Path

    @property
    def bin(self) -> Path:
        return self.root / "bin"

    def env(self) -> dict[str, str]:
        env = git_env(self.home)
        env.pop("PYTHONPATH", None)
        env.pop("VIRTUAL_ENV", None)
        env.update({"PATH": os.pathsep.join([str(self.bin), "/usr/local/bin", "/usr/bin", "/bin"]),
                    "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8", "NO_PROXY": "127.0.0.1,localhost",
                    "PYTHONDONTWRITEBYTECODE": "1"})
        for name in ("OPENROUTER_API_KEY", "TAVILY_API_KEY", "GITHUB_TOKEN", "GH_TOKEN", "RESEARCH_DISPATCH_DEBUG"):
            env.pop(name, None)
        return env

    def run(self, args: Sequence[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """A command of the fresh venv, as a user types it (console script first)."""
        command = [str(self.bin / args[0]), *args[1:]] if (self.bin / args[0]).exists() else list(args)
        return subprocess.run(command, cwd=cwd, env=self.env(), capture_output=True, text=True, timeout=timeout,
                              check=False)


@pytest.fixture(scope="session")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Dist:
    """`python -m build` of this checkout: an sdist, then a wheel built from that sdist."""
    out = tmp_path_factory.mktemp("dist")
    proc = subprocess.run([sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)], cwd=out,
                          capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (wheel,) = out.glob("*.whl")
    (sdist,) = out.glob("*.tar.gz")
    return Dist(wheel=wheel, sdist=sdist, log=proc.stdout + proc.stderr)


@pytest.fixture(scope="session")
def fresh_venv(dist: Dist, tmp_path_factory: pytest.TempPathFactory) -> FreshVenv:
    root = tmp_path_factory.mktemp("fresh") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True, timeout=120)
    python = root / "bin" / "python"
    # pip of the dev venv installs into the fresh one: --no-index, so nothing comes from a package index
    proc = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-index",
                           "--no-deps", "--disable-pip-version-check", str(dist.wheel)],
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    dev_site = [p for p in site.getsitepackages() if Path(p).is_dir()]
    (Path(purelib) / "zz_borrowed_dependencies.pth").write_text("\n".join(dev_site) + "\n", encoding="utf-8")
    home = root.parent / "home"
    home.mkdir()
    return FreshVenv(root=root, home=home)
