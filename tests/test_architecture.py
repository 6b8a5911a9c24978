"""The import direction (docs/ARCHITECTURE.md, "What each folder may import").

The layers — the stages import one way, like the data (core ← config ← gateway, tools ← leg ← synthesis
← publish ← run ← adopt, cli, with gateway and tools peers), the synthesis' sub-stages likewise (common
← read ← extract ← check ← align ← count ← write ← cache, stale ← pipeline ← command), no import cycle,
and only the demo and the FIXED `python -m research_dispatch.fake` entry point importing the fakes — are
import-linter contracts (`[tool.importlinter]` in pyproject.toml), checked here and by `make lint`.

What import-linter cannot say is read from the source here, with `ast` (nothing is imported):

* the fakes (`research_dispatch_fakes`) import nothing of the product but the conversation contract
  (`research_dispatch.leg.contract`), which itself imports nothing of the product: a fake that shared the
  product's parsing could not catch its bugs;
* in the product, an import inside a function is allowed only with a `# lazy: <why>` comment on it or on
  the comment line right above its block (the CLI's start time, a platform-only module), and only the CLI
  defers the product's own modules; every other import is at the top, so the graph is visible and every
  module is loaded in the main thread before a worker starts.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from importlinter.cli import lint_imports

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "scripts"
PRODUCT, FAKES = "research_dispatch", "research_dispatch_fakes"
CONTRACT = "research_dispatch.leg.contract"


@dataclass(frozen=True)
class Import:
    source: str  # the importing module
    target: str  # the imported module (`from a.b import c` is a.b.c when that is a module, else a.b)
    line: int
    in_function: bool
    lazy_comment: bool  # a `# lazy:` comment on the line or above the block


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SCRIPTS).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for package in (PRODUCT, FAKES)
           for path in sorted((SCRIPTS / package).rglob("*.py"))}


def _resolve(name: str) -> str:
    """The module an imported dotted name lives in (a name that is no module is an attribute of its parent)."""
    while name not in MODULES and "." in name:
        name = name.rsplit(".", 1)[0]
    return name


def _lazy(lines: list[str], node: ast.stmt) -> bool:
    if "# lazy:" in "".join(lines[node.lineno - 1:node.end_lineno]):
        return True
    above = node.lineno - 2
    while above >= 0 and lines[above].lstrip().startswith(("from ", "import ")):
        above -= 1  # the block of imports this one belongs to
    return above >= 0 and lines[above].lstrip().startswith("# lazy:")


def imports_of(module: str) -> list[Import]:
    text = MODULES[module].read_text(encoding="utf-8")
    lines = text.splitlines()
    tree = ast.parse(text)
    inside = {id(node) for function in ast.walk(tree) if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef)
              for node in ast.walk(function) if node is not function}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            target = _resolve(name)
            if target.split(".")[0] in (PRODUCT, FAKES) and target != module:
                found.append(Import(module, target, node.lineno, id(node) in inside, _lazy(lines, node)))
            elif target.split(".")[0] not in (PRODUCT, FAKES) and id(node) in inside:
                found.append(Import(module, name, node.lineno, True, _lazy(lines, node)))
    return found


IMPORTS = [edge for module in MODULES for edge in imports_of(module)]
EDGES = [edge for edge in IMPORTS if edge.target in MODULES]


def where(edge: Import) -> str:
    return f"{MODULES[edge.source].relative_to(ROOT)}:{edge.line} imports {edge.target}"


def test_the_graph_is_read_from_every_module() -> None:
    assert len(MODULES) > 80 and CONTRACT in MODULES
    assert any(e.source == f"{PRODUCT}.leg.execute" and e.target == f"{PRODUCT}.leg.status" for e in EDGES)
    assert any(e.in_function and e.source == f"{PRODUCT}.cli" for e in IMPORTS)  # function-level ones count


def test_the_import_linter_contracts_hold(capsys: pytest.CaptureFixture[str]) -> None:
    code = lint_imports(config_filename=str(ROOT / "pyproject.toml"), no_cache=True, no_logo=True)
    assert code == 0, capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.parametrize(("module", "wrong"), [
    ("core/bounds.py", "research_dispatch.leg.status"),  # a stage importing one above it
    ("gateway/route.py", "research_dispatch.tools.chunks"),  # peers
    ("synthesis/read/units.py", "research_dispatch.synthesis.write.ledger"),  # a sub-stage above
    ("run/pool.py", "research_dispatch_fakes.gateway"),  # the fakes outside the demo
], ids=["core imports leg", "gateway imports tools", "read imports write", "run imports the fakes"])
def test_the_contracts_refuse_a_wrong_import(tmp_path: Path, module: str, wrong: str) -> None:
    """A copy of the packages with one wrong import breaks a contract: the configuration checks something."""
    for package in (PRODUCT, FAKES):
        shutil.copytree(SCRIPTS / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    target = tmp_path / PRODUCT / module
    target.write_text(target.read_text(encoding="utf-8") + f"import {wrong}  # noqa\n", encoding="utf-8")
    done = subprocess.run([sys.executable, "-c", "import sys; from importlinter.cli import lint_imports; "
                           "sys.exit(lint_imports(config_filename='pyproject.toml', no_cache=True, no_logo=True))"],
                          cwd=tmp_path, env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, check=False, timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"{PRODUCT}.{module[:-3].replace('/', '.')} -> {wrong}" in " ".join(done.stdout.split())


def test_the_fakes_import_only_the_contract() -> None:
    fakes = [where(e) for e in EDGES if e.source.split(".")[0] == FAKES and e.target.split(".")[0] == PRODUCT
             and e.target not in (CONTRACT, PRODUCT, f"{PRODUCT}.leg")]
    assert fakes == []
    contract = [where(e) for e in EDGES if e.source == CONTRACT]
    assert contract == []  # the contract itself imports nothing of the product: the fakes get nothing else


def test_the_package_root_imports_nothing_of_the_product() -> None:
    assert [where(e) for e in EDGES if e.source == PRODUCT] == []  # it holds the version, read by every stage


def test_function_level_imports_say_why() -> None:
    unexplained = [where(e) for e in IMPORTS
                   if e.in_function and not e.lazy_comment and e.source.split(".")[0] == PRODUCT]
    assert unexplained == []


def test_only_the_cli_defers_the_product_s_own_modules() -> None:
    deferred = {e.source for e in IMPORTS if e.in_function and e.target.split(".")[0] == PRODUCT}
    assert deferred <= {f"{PRODUCT}.cli"}
