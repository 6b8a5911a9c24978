"""The import direction (docs/ARCHITECTURE.md, "What each folder may import"), read from the source.

Every module's imports — at the top, under `TYPE_CHECKING` and inside functions — are parsed with `ast`
(nothing is imported), and the rules hold:

* no import cycle between modules;
* imports run one way, like the data: core ← config ← gateway, tools ← leg ← synthesis ← publish ← run ←
  adopt, cli. gateway and tools are peers that do not import each other; adopt and cli sit at the top,
  cli may start adopt's commands, no stage imports cli;
* a leg knows nothing of synthesis or publishing (it is below both);
* the fakes (`research_dispatch_fakes`) import nothing of the product but the conversation contract
  (`research_dispatch.leg.contract`), and only the demo and the FIXED `python -m research_dispatch.fake`
  entry point import the fakes;
* in the product, an import inside a function is allowed only with a `# lazy: <why>` comment on it or on
  the comment line right above its block (the CLI's start time, a platform-only module); every other
  import is at the top, so the graph is visible and every module is loaded in the main thread before a
  worker starts.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "scripts"
PRODUCT, FAKES = "research_dispatch", "research_dispatch_fakes"
CONTRACT = "research_dispatch.leg.contract"

# Each stage folder's rank: a module may import its own stage and the stages of a lower rank only.
RANK = {"core": 0, "config": 1, "gateway": 2, "tools": 2, "leg": 3, "synthesis": 4, "publish": 5, "run": 6,
        "adopt": 7, "cli": 8}
# Modules outside the stage folders: the package itself (the version), `python -m research_dispatch`
# (the CLI), and the FIXED `python -m research_dispatch.fake` entry point (the fakes).
OUTSIDE = {PRODUCT: 0, f"{PRODUCT}.__main__": 9, f"{PRODUCT}.fake": 9, f"{PRODUCT}.fake.__main__": 9}
FAKE_USERS = {f"{PRODUCT}.adopt.demo", f"{PRODUCT}.fake.__main__"}


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


def stage(module: str) -> str | None:
    """The stage folder of a product module (`cli` for cli.py), or None outside them."""
    parts = module.split(".")
    if parts[0] != PRODUCT or module in OUTSIDE:
        return None
    return parts[1]


def rank(module: str) -> int:
    if module in OUTSIDE:
        return OUTSIDE[module]
    name = stage(module)
    assert name in RANK, f"{module}: not in a stage folder of docs/ARCHITECTURE.md ({', '.join(RANK)})"
    return RANK[name]


def where(edge: Import) -> str:
    return f"{MODULES[edge.source].relative_to(ROOT)}:{edge.line} imports {edge.target}"


def test_the_graph_is_read_from_every_module() -> None:
    assert len(MODULES) > 80 and CONTRACT in MODULES
    assert any(e.source == f"{PRODUCT}.leg.execute" and e.target == f"{PRODUCT}.leg.status" for e in EDGES)
    assert any(e.in_function and e.source == f"{PRODUCT}.cli" for e in IMPORTS)  # function-level ones count


def test_no_import_cycle() -> None:
    graph: dict[str, set[str]] = {module: set() for module in MODULES}
    for edge in EDGES:
        graph[edge.source].add(edge.target)
    cycles = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for target in sorted(graph[module]):
            if state.get(target) == 1:
                cycles.append(" → ".join([*path[path.index(target):], target]))
            elif target not in state:
                visit(target, [*path, target])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert cycles == []


def test_imports_run_one_way_like_the_data() -> None:
    product = [e for e in EDGES if e.source.split(".")[0] == PRODUCT and e.target.split(".")[0] == PRODUCT]
    against = [where(e) for e in product
               if stage(e.source) != stage(e.target) and rank(e.target) >= rank(e.source)]
    assert against == []


def test_gateway_and_tools_do_not_import_each_other() -> None:
    between = [where(e) for e in EDGES if {stage(e.source), stage(e.target)} == {"gateway", "tools"}]
    assert between == []


@pytest.mark.parametrize("lower", ["core", "config", "gateway", "tools", "leg", "synthesis", "publish", "run",
                                   "adopt"])
def test_no_stage_imports_the_cli(lower: str) -> None:
    assert [where(e) for e in EDGES if stage(e.source) == lower and e.target == f"{PRODUCT}.cli"] == []


def test_a_leg_knows_nothing_of_synthesis_or_publishing() -> None:
    assert [where(e) for e in EDGES if stage(e.source) == "leg" and stage(e.target) in ("synthesis", "publish")] == []


def test_the_fakes_import_only_the_contract_and_only_the_demo_imports_them() -> None:
    fakes = [where(e) for e in EDGES if e.source.split(".")[0] == FAKES and e.target.split(".")[0] == PRODUCT
             and e.target not in (CONTRACT, PRODUCT, f"{PRODUCT}.leg")]
    assert fakes == []
    contract = [where(e) for e in EDGES if e.source == CONTRACT]
    assert contract == []  # the contract itself imports nothing of the product: the fakes get nothing else
    users = {e.source for e in EDGES if e.target.split(".")[0] == FAKES and e.source.split(".")[0] == PRODUCT}
    assert users <= FAKE_USERS


def test_function_level_imports_say_why() -> None:
    unexplained = [where(e) for e in IMPORTS
                   if e.in_function and not e.lazy_comment and e.source.split(".")[0] == PRODUCT]
    assert unexplained == []


def test_only_the_cli_defers_the_product_s_own_modules() -> None:
    deferred = {e.source for e in IMPORTS if e.in_function and e.target.split(".")[0] == PRODUCT}
    assert deferred <= {f"{PRODUCT}.cli"}


def test_every_stage_folder_is_ranked() -> None:
    folders = {path.name for path in (SCRIPTS / PRODUCT).iterdir() if (path / "__init__.py").is_file()}
    assert folders - {"fake"} == set(RANK) - {"cli"}
