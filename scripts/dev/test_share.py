"""The share of test items that run the `research-dispatch` CLI as a separate process (issue 16).

    .venv/bin/python scripts/dev/test_share.py                 the whole suite as `make test` runs it
    .venv/bin/python scripts/dev/test_share.py --by-module     ... and the figure per test module
    .venv/bin/python scripts/dev/test_share.py --checkout DIR  measure another checkout (e.g. an older commit)
    .venv/bin/python scripts/dev/test_share.py -- tests/cli    extra pytest arguments after `--`

Why measured by running the suite, not by reading it: a test reaches the CLI through helpers and
fixtures (`run_cli`, `world.cli`, `synthesize_cli`, a workflow step's script), which a text search
miscounts both ways. So this file is also a pytest plugin (loaded with `-p`): in every pytest process it
wraps `subprocess.Popen` and records which test item, and which fixture, started a CLI process.

The rule. A collected test item (each parametrised case counts once) runs the CLI as a separate process
when, during its setup, call or teardown, the test process starts a process that is the CLI, or when a
fixture it uses (including one set up earlier for a module or the session, or requested with
`getfixturevalue`) started one while it was being set up. A process is the CLI when its argv is
  * the `research-dispatch` console script (any directory), or
  * `python -m research_dispatch` (not `-m research_dispatch.fake`, the fake servers), or
  * `python -c CODE` whose code calls `research_dispatch.cli`, or
  * a shell (`bash`/`sh`) running a script file or `-c` text with a `research-dispatch` command line —
    a workflow step run by tests/workflows/runner_harness.py.
In-process `CliRunner` invocations do not count: they share the test's interpreter.
Denominator: every test item that ran (skipped ones included). `tests/interop` is left out, as in
`make test`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Generator, Iterable
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
RESULTS_ENV = "TEST_SHARE_RESULTS"  # a directory: each pytest process writes one JSON file there
SUITE_ARGS = ["-n", "2", "--dist", "loadfile", "--ignore=tests/interop"]
SHELLS = {"bash", "sh", "dash"}
PLUGIN = "test_share_plugin"
SHIM = """import importlib.util
_spec = importlib.util.spec_from_file_location("test_share", {path!r})
_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_module)
globals().update({{k: v for k, v in vars(_module).items() if k.startswith("pytest_")}})
"""
COMMAND_LINE = re.compile(r"(^|[\s;|&(`$/])research-dispatch(\s|$)", re.MULTILINE)


# ----------------------------------------------------------------------------------------------
# Which process is the CLI


def _argv(args: Any) -> list[str]:
    if isinstance(args, (str, bytes, os.PathLike)):
        return [os.fsdecode(args)]
    return [os.fsdecode(a) if isinstance(a, (bytes, os.PathLike)) else str(a) for a in args]


def _shell_text(argv: list[str]) -> str:
    """The script a shell command line runs: its `-c` text, else the files among its arguments."""
    texts = []
    for index, arg in enumerate(argv[1:], start=1):
        if arg == "-c" and index + 1 < len(argv):
            return argv[index + 1]
        if not arg.startswith("-") and Path(arg).is_file():
            texts.append(Path(arg).read_text(encoding="utf-8", errors="replace"))
    return "\n".join(texts)


def is_cli(args: Any, shell: bool = False) -> bool:
    """Whether a Popen argv starts the research-dispatch CLI (the rule in the module docstring)."""
    argv = _argv(args)
    if not argv:
        return False
    if shell:
        return bool(COMMAND_LINE.search(" ".join(argv)))
    if Path(argv[0]).name == "research-dispatch":
        return True
    for index, arg in enumerate(argv[:-1]):
        if arg == "-m" and argv[index + 1] == "research_dispatch":
            return True
        if arg == "-c" and "research_dispatch.cli" in argv[index + 1]:
            return True
    if Path(argv[0]).name in SHELLS:
        return bool(COMMAND_LINE.search(_shell_text(argv)))
    return False


# ----------------------------------------------------------------------------------------------
# The plugin: active only when RESULTS_ENV is set (this script sets it)

_current_item: str | None = None
_fixture_stack: list[tuple[str, str]] = []
_cli_fixtures: set[tuple[str, str]] = set()
_direct: set[str] = set()
_ran: list[str] = []
_cli_items: list[str] = []
_used: dict[str, set[tuple[str, str]]] = {}


def _record(args: Any, shell: bool) -> None:
    if not is_cli(args, shell):
        return
    if _current_item is not None:
        _direct.add(_current_item)
    _cli_fixtures.update(_fixture_stack)


def _wrap_popen() -> None:
    original = subprocess.Popen.__init__

    def __init__(self: subprocess.Popen[Any], args: Any, *rest: Any, **kwargs: Any) -> None:
        _record(args, bool(kwargs.get("shell")))
        original(self, args, *rest, **kwargs)

    subprocess.Popen.__init__ = __init__  # type: ignore[method-assign]


def pytest_configure(config: pytest.Config) -> None:
    if os.environ.get(RESULTS_ENV):
        _wrap_popen()


def _key(fixturedef: Any) -> tuple[str, str]:
    return (str(getattr(fixturedef, "baseid", "")), str(fixturedef.argname))


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(fixturedef: Any, request: Any) -> Generator[None, Any, Any]:
    _fixture_stack.append(_key(fixturedef))
    try:
        return (yield)
    finally:
        _fixture_stack.pop()


def _used_fixtures(item: pytest.Item) -> Iterable[tuple[str, str]]:
    """The fixture definitions an item used: its static closure, plus any `getfixturevalue` ones."""
    info = getattr(item, "_fixtureinfo", None)
    for defs in (getattr(info, "name2fixturedefs", None) or {}).values():
        if defs:
            yield _key(defs[-1])
    request = getattr(item, "_request", None)
    for fixturedef in (getattr(request, "_fixture_defs", None) or {}).values():
        yield _key(fixturedef)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_teardown(item: pytest.Item) -> None:
    """Read the fixtures now: after teardown pytest drops the item's request (and `getfixturevalue` ones)."""
    _used[item.nodeid] = set(_used_fixtures(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, Any, Any]:
    global _current_item
    _current_item = item.nodeid
    try:
        return (yield)
    finally:
        _current_item = None
        _ran.append(item.nodeid)
        used = _used.pop(item.nodeid, set()) | set(_used_fixtures(item))
        if item.nodeid in _direct or used & _cli_fixtures:
            _cli_items.append(item.nodeid)


def pytest_sessionfinish(session: pytest.Session) -> None:
    folder = os.environ.get(RESULTS_ENV)
    if folder and _ran:
        name = f"{os.getpid()}.json"
        Path(folder, name).write_text(json.dumps({"ran": _ran, "cli": _cli_items}), encoding="utf-8")


# ----------------------------------------------------------------------------------------------
# The script


def function_of(nodeid: str) -> str:
    return nodeid.split("[", 1)[0]


def module_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def measure(checkout: Path, extra: list[str]) -> tuple[set[str], set[str], int]:
    with tempfile.TemporaryDirectory(prefix="test-share-") as folder:
        # The plugin is this file, loaded by path from a one-line module in a folder of its own: putting
        # scripts/ on PYTHONPATH would leak into the tests' children (its .egg-info makes pip believe
        # research-dispatch is installed in tests/adopt's fresh virtualenv).
        plugins = Path(folder, "plugin")
        plugins.mkdir()
        (plugins / f"{PLUGIN}.py").write_text(SHIM.format(path=str(Path(__file__).resolve())), encoding="utf-8")
        env = dict(os.environ)
        env[RESULTS_ENV] = folder
        env["PYTHONPATH"] = os.pathsep.join([str(plugins), *filter(None, [env.get("PYTHONPATH")])])
        args = [sys.executable, "-m", "pytest", "-p", PLUGIN, "-q", "-p", "no:cacheprovider",
                *(extra or SUITE_ARGS)]
        code = subprocess.run(args, cwd=checkout, env=env, check=False).returncode
        ran: set[str] = set()
        cli: set[str] = set()
        for path in Path(folder).glob("*.json"):
            data = json.loads(path.read_text(encoding="utf-8"))
            ran.update(data["ran"])
            cli.update(data["cli"])
    return ran, cli, code


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkout", type=Path, default=ROOT, help="the checkout whose suite to run")
    parser.add_argument("--by-module", action="store_true", help="also print the figure per test module")
    parser.add_argument("pytest_args", nargs="*", help="pytest arguments (default: the whole suite, as make test)")
    options = parser.parse_args()
    ran, cli, code = measure(options.checkout.resolve(), options.pytest_args)
    if not ran:
        print("no test ran", file=sys.stderr)
        return 1
    functions = {function_of(n) for n in ran}
    cli_functions = {function_of(n) for n in cli}
    if options.by_module:
        per_module, per_module_cli = Counter(map(module_of, ran)), Counter(map(module_of, cli))
        for module in sorted(per_module):
            print(f"{per_module_cli[module]:5d} / {per_module[module]:5d}  {module}")
    print(f"test items that run the CLI as a separate process: {len(cli)} of {len(ran)} "
          f"({100 * len(cli) / len(ran):.1f}%)")
    print(f"test functions (parametrised cases as one): {len(cli_functions)} of {len(functions)} "
          f"({100 * len(cli_functions) / len(functions):.1f}%)")
    if code != 0:
        print(f"note: pytest exited {code}; the figure counts the tests that ran", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
