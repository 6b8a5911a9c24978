"""Every file a docstring or a comment cites by path exists in the repository.

Why: a docstring is where a reader goes to learn why the code is as it is, and a citation of a file the
repository does not hold (a design note or a fact sheet kept elsewhere) sends them nowhere. Cited here:
`docs/…` and `tests/…` paths, and any Markdown file. A bare file name counts when a file of that name is
in the repository; a path counts when it exists from the repository's root (or, for a relative link, from
the citing file's folder).
"""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CITED = re.compile(r"(?<![\w/.-])((?:docs|tests)/[\w./-]*\w|(?:\.\./)*[\w./-]*\w\.md)\b")
COMMENT = re.compile(r"(?:^|\s)#\s(.*)$")
OUTPUTS = ("research/", "framework/", "build/")  # what the product writes in a user's repository: not cited files
TEMPLATES = ROOT / "scripts/research_dispatch/adopt/templates"  # files for another repository


def tracked() -> list[Path]:
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [ROOT / name for name in listed.split("\0") if name]


FILES = tracked()
NAMES = {path.name for path in FILES}


def prose(path: Path) -> list[tuple[int, str]]:
    """(line, text) of the comment and docstring lines of a Python file that cite something; of the comments of
    another file. A comment is what follows a `# ` that starts the line or follows a space."""
    text = path.read_text(encoding="utf-8")
    if not CITED.search(text):
        return []  # most files cite nothing: no need to parse them
    lines = text.splitlines()
    docstrings: set[int] = set()
    if path.suffix == ".py":
        bodies = [ast.parse(text)]
        while bodies:
            for node in bodies.pop().body:  # type: ignore[attr-defined]
                if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) \
                        and isinstance(node.value.value, str):
                    docstrings.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
                elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    bodies.append(node)
    cited = [(number, line if number in docstrings else comment.group(1) if (comment := COMMENT.search(line)) else "")
             for number, line in enumerate(lines, 1)]
    return [(number, part) for number, part in cited if CITED.search(part)]


def exists(cited: str, citing: Path) -> bool:
    if cited.startswith(OUTPUTS):
        return True
    if "/" not in cited:
        return cited in NAMES
    if "*" in cited or "{" in cited:
        return True
    return (ROOT / cited).exists() or (citing.parent / cited).exists()


@pytest.mark.slow  # reads and parses every tracked file: about a second of CPU
def test_every_cited_path_exists() -> None:
    missing = []
    for path in FILES:
        if (path.suffix not in (".py", ".toml", ".yml", ".yaml") and path.name != "Makefile") \
                or path.is_relative_to(TEMPLATES):
            continue
        for line, text in prose(path):
            for cited in CITED.findall(text):
                if not exists(cited.rstrip("."), path):
                    missing.append(f"{path.relative_to(ROOT)}:{line} cites {cited}")
    assert missing == []


def test_the_check_sees_what_it_should() -> None:
    assert CITED.findall("see DESIGN.md § Route verdicts and docs/ARCHITECTURE.md, tests/seam.py") == [
        "DESIGN.md", "docs/ARCHITECTURE.md", "tests/seam.py"]
    assert not exists("DESIGN.md", ROOT / "x.py") and not exists("reference/api-facts.md", ROOT / "x.py")
    assert exists("README.md", ROOT / "x.py") and exists("docs/REAL-SERVICES.md", ROOT / "x.py")
