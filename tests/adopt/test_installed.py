"""The package as a newcomer gets it: `python -m build`, the wheel installed into a fresh virtualenv
outside the checkout, then `init` an empty git repository, `check`, and `demo --repo` on the fakes.

Every command runs in a fresh interpreter from the fresh venv's console script, with the working
directory outside this checkout. One file on purpose: the session's wheel build and venv install happen
once (conftest.py explains the venv).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from research_dispatch import __version__
from research_dispatch.config.plan import current_cycle
from tests.adopt.conftest import Dist, FreshVenv, empty_repository, git, snapshot
from tests.conftest import ROOT
from tests.workflows.adopter import ADOPTER_FILES, REUSABLE, scaffold

# Every test here uses the built wheel and sdist or a fresh venv with the wheel installed: a build.
pytestmark = pytest.mark.slow

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

SCRIPTS = ROOT / "scripts"
PACKAGES = ("research_dispatch", "research_dispatch_fakes")  # one wheel: the product and its fakes
SHA = "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c"


def data_files() -> list[str]:
    """Every non-Python file of the packages on disk (what a wheel must carry), as `<package>/<path>`."""
    return sorted(p.relative_to(SCRIPTS).as_posix() for package in PACKAGES for p in (SCRIPTS / package).rglob("*")
                  if p.is_file() and p.suffix not in (".py", ".pyc") and "__pycache__" not in p.parts)


def test_the_build_is_clean(dist: Dist) -> None:
    assert dist.wheel.name == f"research_dispatch-{__version__}-py3-none-any.whl"
    assert dist.sdist.name == f"research_dispatch-{__version__}.tar.gz"
    assert "Building wheel from sdist" in dist.log  # the wheel comes from the sdist: the sdist is complete
    warnings = [line for line in dist.log.splitlines() if re.search(r"deprecat|SetuptoolsWarning", line, re.I)]
    assert warnings == []


def test_wheel_and_sdist_carry_every_data_file(dist: Dist) -> None:
    expected = data_files()
    for needle in ("research_dispatch_fakes/corpus/pages.json", "research_dispatch_fakes/py.typed",
                   "research_dispatch/adopt/demo_review/topics/02-diloco-family.yaml",
                   "research_dispatch/adopt/demo_review/config.toml",
                   "research_dispatch/config/schemas/topic.schema.json",
                   "research_dispatch/config/schemas/config.schema.json",
                   "research_dispatch/adopt/templates/topic-example.yaml",
                   "research_dispatch/adopt/templates/workflows/research-refresh.yml",
                   "research_dispatch/adopt/templates/workflows/research-refresh-schedule.yml",
                   "research_dispatch/py.typed"):
        assert needle in expected
    wheel = set(zipfile.ZipFile(dist.wheel).namelist())
    assert [f for f in expected if f not in wheel] == []
    prefix = f"research_dispatch-{__version__}/scripts/"
    with tarfile.open(dist.sdist) as archive:
        sdist = set(archive.getnames())
    assert [f for f in expected if prefix + f not in sdist] == []
    assert not [n for n in wheel if n.startswith(("tests/", "topics/")) or "__pycache__" in n]


def test_the_version_comes_from_one_place(dist: Dist, fresh_venv: FreshVenv, tmp_path: Path) -> None:
    metadata = zipfile.ZipFile(dist.wheel).read(f"research_dispatch-{__version__}.dist-info/METADATA").decode()
    assert f"\nVersion: {__version__}\n" in metadata
    assert "Project-URL: Repository, https://github.com/research-dispatch/research-dispatch" in metadata
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" not in pyproject["project"] and pyproject["project"]["dynamic"] == ["version"]
    assert pyproject["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "research_dispatch.__version__"}
    done = fresh_venv.run(["research-dispatch", "--version"], cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.strip() == f"research-dispatch {__version__} (commit {built_from()})"


def test_the_fresh_venv_runs_the_wheel_not_the_checkout(fresh_venv: FreshVenv, tmp_path: Path) -> None:
    done = fresh_venv.run(["python", "-c", "import research_dispatch, sys; print(research_dispatch.__file__); "
                           "print(sys.prefix)"], cwd=tmp_path)
    module, prefix = done.stdout.split()
    assert Path(module).is_relative_to(fresh_venv.root) and Path(prefix) == fresh_venv.root
    assert not Path(module).is_relative_to(ROOT)


def test_from_an_empty_repository_to_a_demo_refresh_with_the_installed_package(
        fresh_venv: FreshVenv, tmp_path: Path) -> None:
    """The README quick start, from the wheel: init, check, demo --repo; then what the demo left behind."""
    repo = empty_repository(tmp_path / "my-review")

    done = fresh_venv.run(["research-dispatch", "init", "--ref", SHA], cwd=repo)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"workflows call {REUSABLE}@{SHA} (--ref)" in done.stdout
    for step in ("gh secret set OPENROUTER_API_KEY", "gh secret set TAVILY_API_KEY", "research-dispatch check",
                 "research-dispatch demo --repo .", "gh workflow run research-refresh.yml -f dry-run=true"):
        assert step in done.stdout
    files = sorted(p.relative_to(repo).as_posix() for p in repo.rglob("*") if p.is_file() and ".git" not in p.parts)
    assert files == [".github/dependabot.yml", ".github/workflows/research-refresh-schedule.yml",
                     ".github/workflows/research-refresh.yml",
                     ".gitignore", "docs/METHODOLOGY.md", "framework/.gitkeep", "pyproject.toml",
                     "research/.gitkeep", "topics/01-example.yaml"]
    # the workflows the wheel writes are the ones the workflow suite lints, checks and runs
    reference = scaffold(tmp_path / "in-process", ref=SHA)
    for name in ADOPTER_FILES:
        assert (repo / ".github/workflows" / name).read_bytes() == (reference / ".github/workflows" / name).read_bytes()

    done = fresh_venv.run(["research-dispatch", "check"], cwd=repo)
    assert done.returncode == 0 and done.stdout.strip() == "ok: 1 topic(s), 2 leg(s)", done.stdout + done.stderr

    done = fresh_venv.run(["research-dispatch", "demo", "--repo", "."], cwd=repo)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "✗" not in done.stdout and done.stdout.count("  ✓ ") == 9  # 8 + every report has its evidence
    demo = repo / "build" / "demo"
    for report in ("research/01-example.openai-gpt-5.md", "research/01-example.anthropic-claude-sonnet-4.6.md"):
        text = (demo / report).read_text(encoding="utf-8")
        assert "route: exact" in text and "status: ok" in text and "## References" in text
    assert (demo / "framework" / "synthesis.md").is_file()
    ledger = json.loads((demo / "framework" / "claims.json").read_text(encoding="utf-8"))
    assert ledger["counts"]["clusters"]["convergent"] >= 1  # two families agree on something
    assert "| research/01-example.openai-gpt-5.md | openai/gpt-5 | openai/gpt-5 | exact |" in \
        (demo / "docs" / "METHODOLOGY.md").read_text(encoding="utf-8")
    origin = repo / "build" / "demo.origin.git"
    branch = f"research-refresh/{current_cycle()}"
    subjects = git(origin, "log", "--format=%s", f"main..{branch}").splitlines()
    assert len(subjects) == 3 and subjects[0].startswith("research(synthesis)")
    trailers = git(origin, "log", "--format=%(trailers:only,unfold)", f"main..{branch}")
    assert trailers.count("Route: exact") == 2
    assert "pull request: #1" in done.stdout and (demo / "build" / "pr-body.md").is_file()
    # the adopter's own repository: the demo lives in the ignored build/, nothing else changed
    assert "build" not in git(repo, "status", "--porcelain", "--untracked-files=all")

    # init again: nothing changes (not a byte, not an mtime)
    before = snapshot(repo)
    done = fresh_venv.run(["research-dispatch", "init", "--ref", SHA], cwd=repo)
    assert done.returncode == 0 and "nothing to do" in done.stdout
    assert snapshot(repo) == before


def test_zizmor_and_the_schema_pass_the_workflows_the_wheel_writes(fresh_venv: FreshVenv, tmp_path: Path) -> None:
    repo = empty_repository(tmp_path / "review")
    assert fresh_venv.run(["research-dispatch", "init", "--ref", SHA], cwd=repo).returncode == 0
    tools = Path(sys.executable).parent
    zizmor = subprocess.run([str(tools / "zizmor"), "--offline", "--persona=pedantic", "--min-severity", "low",
                             str(repo / ".github")], capture_output=True, text=True, timeout=120, check=False)
    assert zizmor.returncode == 0, zizmor.stdout + zizmor.stderr  # not even a low finding
    schema = subprocess.run([str(tools / "check-jsonschema"), "--builtin-schema", "vendor.github-workflows",
                             *map(str, sorted((repo / ".github" / "workflows").glob("*.yml")))],
                            capture_output=True, text=True, timeout=120, check=False)
    assert schema.returncode == 0, schema.stdout + schema.stderr


def built_from() -> str:
    """The commit the session's wheel and sdist were built from: this checkout's HEAD."""
    return git(ROOT, "rev-parse", "HEAD")


def test_the_wheel_and_the_sdist_record_the_commit_they_were_built_from(dist: Dist) -> None:
    """A wheel from an index has no PEP 610 record, so the build writes the commit into the package; the
    session's wheel is built from the sdist (no .git there), so the sdist carries it too."""
    expected = f'COMMIT = "{built_from()}"'
    assert expected in zipfile.ZipFile(dist.wheel).read("research_dispatch/_build_info.py").decode()
    with tarfile.open(dist.sdist) as archive:
        member = archive.extractfile(f"research_dispatch-{__version__}/scripts/research_dispatch/_build_info.py")
        assert member is not None and expected in member.read().decode()


def test_init_from_the_wheel_pins_the_full_commit_it_was_built_from(fresh_venv: FreshVenv, tmp_path: Path) -> None:
    repo = empty_repository(tmp_path / "review")
    done = fresh_venv.run(["research-dispatch", "init"], cwd=repo)
    assert done.returncode == 0, done.stderr
    commit = built_from()
    assert f"workflows call {REUSABLE}@{commit} (the commit this package was built from)" in done.stdout
    for name in ADOPTER_FILES:
        text = (repo / ".github/workflows" / name).read_text(encoding="utf-8")
        assert f"@{commit} # v{__version__}" in text and "not a commit pin" not in text
    assert "warning" not in done.stdout
    assert "package-ecosystem: github-actions" in (repo / ".github" / "dependabot.yml").read_text(encoding="utf-8")


def test_demo_without_a_checkout_runs_the_bundled_reference_review(fresh_venv: FreshVenv, tmp_path: Path) -> None:
    """`pipx run research-dispatch demo` in any folder: the five topics ship in the wheel, and the full
    checks of docs/ARCHITECTURE.md's "What the demo promises" (five families, all three finding classes)
    hold."""
    done = fresh_venv.run(["research-dispatch", "demo"], cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "the reference review (bundled with the package)" in done.stdout
    assert "✓ five reports from five model families" in done.stdout
    assert "demo ok: 13/13 checks passed" in done.stdout


@pytest.mark.parametrize("argv", [["init"], ["demo", "--repo", "."]])
def test_outside_a_git_repository_or_without_topics_it_is_exit_2(fresh_venv: FreshVenv, tmp_path: Path,
                                                                 argv: list[str]) -> None:
    done = fresh_venv.run(["research-dispatch", *argv], cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.startswith("error: ") and "Traceback" not in done.stderr
    assert list(tmp_path.iterdir()) == []
