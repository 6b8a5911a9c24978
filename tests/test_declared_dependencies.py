"""Every third-party module the distribution imports is declared in pyproject.toml (issue 28.6).

Why: a module that arrives only as a dependency of a dependency (`requests` through tavily-python,
`httpx2` through openai) works until that dependency changes its own — then a user's fresh install breaks
with an ImportError no test of ours saw. Every import of the packages the wheel ships (`research_dispatch*`,
the fakes included: `python -m research_dispatch.fake` is a FIXED entry point) is read with `ast` — at
the top, inside functions and under `TYPE_CHECKING` alike — and mapped to the distribution that provides
it (`importlib.metadata.packages_distributions`, i.e. the installed environment's own records).
"""

from __future__ import annotations

import ast
import functools
import re
import sys
from importlib.metadata import packages_distributions

import pytest

from tests.conftest import ROOT

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

# Parsing every module of both packages costs about a second of CPU: the slow tier (tests/tierguard.py)
pytestmark = pytest.mark.slow

SCRIPTS = ROOT / "scripts"
PACKAGES = ("research_dispatch", "research_dispatch_fakes")


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def declared() -> set[str]:
    """The distributions `[project] dependencies` names (markers and versions aside)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return {_canonical(re.split(r"[\s\[<>=!~;]", spec, maxsplit=1)[0]) for spec in project["dependencies"]}


@functools.cache
def imported_modules() -> dict[str, str]:
    """Each top-level module imported by the shipped packages, with the first place that imports it."""
    found: dict[str, str] = {}
    for package in PACKAGES:
        for path in sorted((SCRIPTS / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                else:
                    continue
                for name in names:
                    found.setdefault(name.split(".")[0], f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def test_every_imported_third_party_module_is_declared() -> None:
    providers = packages_distributions()
    # tomllib: the standard library from 3.11, imported under a version check (tomli before it)
    local = {*PACKAGES, *sys.stdlib_module_names, "__future__", "tomllib"}
    undeclared = []
    for module, where in sorted(imported_modules().items()):
        if module in local:
            continue
        # not installed here: a dependency for other Pythons only (tomli before 3.11), named as its module
        distributions = {_canonical(d) for d in providers.get(module, [module])}
        if not distributions & declared():
            undeclared.append(f"{where}: imports {module} (from {', '.join(sorted(distributions))})")
    assert undeclared == [], "declare them in pyproject.toml [project] dependencies:\n" + "\n".join(undeclared)


def test_the_reader_sees_imports_of_every_kind() -> None:
    """The reader is not vacuous: it finds the clients at the top, and a module imported only inside a
    function (the CLI defers its stages)."""
    modules = imported_modules()
    assert {"openai", "click", "pydantic", "mcp"} <= set(modules)
    assert "research_dispatch" in modules  # the fakes' import of the contract, a local one
