"""`demo`: the whole refresh offline, on the built-in fakes, in a throwaway git repository.

What it does, in order:

1. recreate the demo directory (default `build/demo`) and its bare `origin` beside it
   (`build/demo.origin.git`). Deleting is dangerous, so only a directory that does not exist, is empty,
   or carries the marker file a previous demo left (`.research-dispatch-demo`) is ever removed;
2. fill it from this repository: `topics/`, `docs/METHODOLOGY.md`, and a `pyproject.toml` holding
   this repository's `[tool.research-dispatch]` table; commit that on `main` as a demo user and push it
   to the bare origin (git identity, signing and hooks are set locally, so a machine with no git
   config — or an unusual one — behaves the same);
3. start the fake gateway, search and GitHub servers on 127.0.0.1 (GitHub serving `acme/review` live
   from the bare origin) and point the refresh at them through an explicit environment — the
   process environment is not used for keys or URLs;
4. run the refresh (`runner.run_refresh`) with publishing, push and PR;
5. print where everything is, and check in code what DESIGN.md promises `make demo` leaves behind:
   five reports from five families in the word band, `ok`, route `exact`, ≥3 cited sources and a
   References section; a synthesis with convergent, divergent and single-source findings and its
   `claims.json`; the methodology dispatch table; one commit per report with the trailers; one PR.
   Each check prints ✓ or ✗; the exit code is 0 only if all hold.

Keys are obviously fake, and still never printed: every line goes through a redactor.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from research_dispatch.errors import BadInput, DispatchError
from research_dispatch.redact import redacting

Echo = Callable[[str], None]
MARKER = ".research-dispatch-demo"
ORIGIN_MARKER = "research-dispatch-demo-origin"
GITHUB_OWNER, GITHUB_NAME = "acme", "review"
DEMO_KEYS = {
    "OPENROUTER_API_KEY": "sk-or-demo-offline-not-a-real-key",
    "TAVILY_API_KEY": "tvly-demo-offline-not-a-real-key",
    "GITHUB_TOKEN": "ghs_demo_offline_not_a_real_token",
}
DEMO_USER = ("research-dispatch demo", "demo@research-dispatch.invalid")
DEFAULT_TABLE = '[tool.research-dispatch]\nframework_name = "composer-replication-framework"\n'
PR_BODY_PREVIEW_LINES = 40
TRAILERS = ("Requested-Model", "Served-Model", "Served-Provider", "Route")


@dataclass
class Check:
    label: str
    ok: bool
    detail: str = ""

    def line(self) -> str:
        return f"  {'✓' if self.ok else '✗'} {self.label}" + (f" — {self.detail}" if self.detail else "")


# ----------------------------------------------------------------------------------------------
# Source repository and the demo directory


def project_root() -> Path | None:
    """This repository, when the package runs from a checkout (editable install); else None."""
    import research_dispatch

    root = Path(research_dispatch.__file__).resolve().parents[2]
    pyproject = root / "pyproject.toml"
    if (root / "topics").is_dir() and pyproject.is_file() and \
            'name = "research-dispatch"' in pyproject.read_text(encoding="utf-8", errors="replace"):
        return root
    return None


def source_root() -> Path:
    root = project_root()
    if root is not None:
        return root
    cwd = Path.cwd()
    if (cwd / "topics").is_dir():
        return cwd
    raise BadInput("the demo copies this repository's topics/ and configuration; run it from a clone of "
                   "research-dispatch (no topics/ found beside the package or in the current directory)",
                   path="topics/")


def config_table(pyproject: Path) -> str:
    """The `[tool.research-dispatch]` table (and its sub-tables) as text, or a bundled default."""
    if not pyproject.is_file():
        return DEFAULT_TABLE
    lines = pyproject.read_text(encoding="utf-8").splitlines()
    kept: list[str] = []
    inside = False
    for line in lines:
        header = re.match(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$", line)
        if header:
            name = header.group(1).strip().strip('"')
            inside = name in ("tool.research-dispatch", 'tool."research-dispatch"') or \
                name.startswith(("tool.research-dispatch.", 'tool."research-dispatch".'))
        if inside:
            kept.append(line)
    text = "\n".join(kept).strip()
    return text + "\n" if text else DEFAULT_TABLE


def _removable(path: Path, marker: str) -> bool:
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        return False
    return not path.exists() or not any(path.iterdir()) or (path / marker).is_file()


def prepare_directory(directory: Path) -> tuple[Path, Path]:
    """Recreate the demo directory and its bare origin, refusing to delete anything else."""
    directory = directory.expanduser()
    directory = directory if directory.is_absolute() else Path.cwd() / directory
    origin = directory.with_name(directory.name + ".origin.git")
    for path, marker in ((directory, MARKER), (origin, ORIGIN_MARKER)):
        if not _removable(path, marker):
            raise BadInput(f"refusing to delete {path}: it is not a previous demo (no {marker} marker inside); "
                           "choose another --dir or remove it yourself", path="--dir")
    cwd = Path.cwd().resolve()
    if directory.exists() and (directory.resolve() == cwd or directory.resolve() in cwd.parents):
        raise BadInput(f"refusing to delete {directory}: it contains the current directory", path="--dir")
    for path in (directory, origin):
        if path.exists():
            shutil.rmtree(path)
    directory.mkdir(parents=True)
    (directory / MARKER).write_text("created by `research-dispatch demo`; safe to delete\n", encoding="utf-8")
    return directory, origin


def _git_env() -> dict[str, str]:
    """Git isolated from the user's global and system config (hooks, signing, templates)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update({"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_TERMINAL_PROMPT": "0",
                "LC_ALL": "C"})
    return env


def git(cwd: Path, *args: str) -> str:
    try:
        done = subprocess.run(["git", *args], cwd=cwd, env=_git_env(), capture_output=True, text=True, check=False)
    except FileNotFoundError:
        raise DispatchError("the demo needs the `git` command; install git and run it again") from None
    if done.returncode != 0:
        first = (done.stderr.strip().splitlines() or ["no message"])[0]
        raise DispatchError(f"git {args[0]} failed: {first[:300]}")
    return done.stdout


def build_repository(directory: Path, origin: Path, source: Path) -> None:
    """Topics, methodology and config from `source`, committed on main and pushed to a bare origin."""
    (directory / "topics").mkdir()
    for path in sorted((source / "topics").iterdir()):
        if path.is_file() and path.suffix in (".yaml", ".yml") and not path.name.startswith("."):
            shutil.copy2(path, directory / "topics" / path.name)
    methodology = source / "docs" / "METHODOLOGY.md"
    if methodology.is_file():
        (directory / "docs").mkdir()
        shutil.copy2(methodology, directory / "docs" / "METHODOLOGY.md")
    (directory / "pyproject.toml").write_text(
        "# Generated by `research-dispatch demo` from this repository's configuration.\n"
        + config_table(source / "pyproject.toml"), encoding="utf-8")
    (directory / ".gitignore").write_text(f"build/\n{MARKER}\n", encoding="utf-8")
    (directory / "README.md").write_text(
        "# research-dispatch demo\n\nAn offline refresh of this repository's review, made by "
        "`research-dispatch demo` against built-in fake servers. Nothing here is real model output.\n",
        encoding="utf-8")
    git(directory, "init", "-q", "-b", "main")
    for key, value in (("user.name", DEMO_USER[0]), ("user.email", DEMO_USER[1]), ("commit.gpgsign", "false"),
                       ("tag.gpgsign", "false"), ("core.hooksPath", ".git/hooks")):
        git(directory, "config", key, value)
    git(directory, "add", "-A")
    git(directory, "commit", "-q", "-m", "Demo repository: topics and configuration")
    origin.mkdir(parents=True)
    git(origin, "init", "-q", "--bare", "-b", "main")
    (origin / ORIGIN_MARKER).write_text("bare origin of a research-dispatch demo; safe to delete\n", encoding="utf-8")
    git(directory, "remote", "add", "origin", str(origin))
    git(directory, "push", "-q", "origin", "main")


@contextlib.contextmanager
def _no_proxy_for_localhost() -> Iterator[None]:
    """HTTP clients read proxy settings from the process environment; the fakes must be reached directly."""
    saved = {name: os.environ.get(name) for name in ("NO_PROXY", "no_proxy")}
    for name in saved:
        current = [p for p in (os.environ.get(name) or "").split(",") if p]
        os.environ[name] = ",".join([*current, *(h for h in ("127.0.0.1", "localhost") if h not in current)])
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value



# ----------------------------------------------------------------------------------------------
# The command


def demo_command(directory: Path, *, echo: Echo) -> int:
    """Build the demo repository, run the refresh on the fakes, print where everything is, check it."""
    from research_dispatch.fake.gateway import FakeGateway
    from research_dispatch.fake.github import FakeGitHub
    from research_dispatch.fake.tavily import FakeTavily
    from research_dispatch.plan import current_cycle
    from research_dispatch.runner import run_refresh

    say = redacting(echo, DEMO_KEYS)
    started = time.monotonic()
    source = source_root()
    directory, origin = prepare_directory(directory)
    build_repository(directory, origin, source)
    cycle = current_cycle()
    say(f"demo: {_show(directory)} (a git repository with origin {_show(origin)}), cycle {cycle}, "
        "fake gateway, search and GitHub on 127.0.0.1")
    say("")
    with _no_proxy_for_localhost(), FakeGateway() as gateway, FakeTavily() as tavily, \
            FakeGitHub(owner=GITHUB_OWNER, name=GITHUB_NAME, git_dir=origin, token=DEMO_KEYS["GITHUB_TOKEN"]) as github:
        env = {
            **DEMO_KEYS,
            "OPENROUTER_BASE_URL": gateway.base_url,
            "TAVILY_BASE_URL": tavily.base_url,
            "GITHUB_API_URL": github.base_url,
            "GITHUB_REPOSITORY": f"{GITHUB_OWNER}/{GITHUB_NAME}",
        }
        outcome = run_refresh(directory, publish=True, push=True, fresh=False, cycle=cycle, env=env, echo=say)
        pulls = github.pulls
    wall = time.monotonic() - started
    say("")
    checks = report_and_check(directory, origin, outcome, pulls, say)
    say("")
    say("checks:")
    for check in checks:
        say(check.line())
    passed = all(c.ok for c in checks)
    say("")
    say(f"demo {'ok' if passed else 'FAILED'}: {sum(c.ok for c in checks)}/{len(checks)} checks passed, "
        f"run exit code {outcome.exit_code}, {wall:.1f} s")
    return 0 if passed and outcome.exit_code == 0 else 1


def _show(path: Path) -> str:
    with contextlib.suppress(ValueError):
        return path.resolve().relative_to(Path.cwd().resolve()).as_posix()
    return str(path)


# ----------------------------------------------------------------------------------------------
# Where everything is, and the checks


def report_and_check(directory: Path, origin: Path, outcome: Any, pulls: list[dict[str, Any]],
                     say: Echo) -> list[Check]:
    from research_dispatch.config import load_settings, load_topics
    from research_dispatch.plan import plan_legs

    settings = load_settings(directory)
    legs = plan_legs(load_topics(directory, settings), settings)
    checks: list[Check] = []
    checks += _reports(directory, settings, legs, say)
    checks += _synthesis(directory, settings, outcome, say)
    checks += _methodology(directory, settings, legs, say)
    checks += _branch(directory, settings, legs, outcome, say)
    checks += _pull_request(directory, settings, outcome, pulls, say)
    return checks


def _reports(directory: Path, settings: Any, legs: list[Any], say: Echo) -> list[Check]:
    from research_dispatch.report import load_report

    say(f"reports ({_show(directory / settings.research_dir)}/):")
    checks = []
    families = set()
    for leg in legs:
        path = directory / leg.report_relpath(settings)
        if not path.exists():
            say(f"  {leg.report_relpath(settings)}: missing")
            checks.append(Check(f"{leg.stem}: report written", False, "missing"))
            continue
        report = load_report(path, repo=directory)
        meta = report.meta
        families.add(meta.family)
        band = meta.word_band or {"min": settings.words.min, "max": settings.words.max}
        say(f"  {report.relpath}: {meta.requested_model} → {', '.join(meta.served_models)} via "
            f"{', '.join(meta.served_providers)}; route {meta.route}, {meta.status}, {meta.words} words, "
            f"{len(meta.sources)} sources")
        problems = []
        if not band["min"] <= meta.words <= band["max"]:
            problems.append(f"{meta.words} words outside {band['min']}–{band['max']}")
        if meta.status != "ok":
            problems.append(f"status {meta.status}")
        if meta.route != "exact" or not meta.route_verified:
            problems.append(f"route {meta.route}")
        if len(meta.sources) < 3:
            problems.append(f"{len(meta.sources)} sources")
        if "## References" not in report.body:
            problems.append("no ## References")
        checks.append(Check(f"{leg.stem}: {band['min']}–{band['max']} words, status ok, route exact, ≥3 cited "
                            "sources, ## References", not problems,
                            "; ".join(problems) or f"{meta.words} words, {len(meta.sources)} sources"))
    found = sum(1 for leg in legs if (directory / leg.report_relpath(settings)).exists())
    checks.insert(0, Check("five reports from five model families", found == len(legs) == 5 and len(families) == 5,
                           f"{found} reports; families: {', '.join(sorted(families)) or 'none'}"))
    return checks


def _classes(ledger: Any) -> dict[str, int]:
    """Finding counts by class from the ledger's `counts.clusters` (schema research-dispatch/claims@1)."""
    clusters = ((ledger or {}).get("counts") or {}).get("clusters") if isinstance(ledger, dict) else None
    if not isinstance(clusters, dict):
        return {}
    return {name.replace("_", "-"): int(value) for name, value in clusters.items() if isinstance(value, int)}


def _decision_table(document: str) -> dict[str, int]:
    """Rows of the document's decision table by the class its status column shows."""
    match = re.search(r"^##[^\n]*decision table[^\n]*\n(.*?)(?=^## |\Z)", document, re.MULTILINE | re.DOTALL |
                      re.IGNORECASE)
    rows = [line.lower() for line in (match.group(1) if match else "").splitlines()
            if line.startswith("|") and not line.startswith("|---")][1:]
    return {name: sum(1 for row in rows if name in row.rsplit("|", 2)[-2]) for name in
            ("convergent", "divergent", "single-source")}


def _synthesis(directory: Path, settings: Any, outcome: Any, say: Echo) -> list[Check]:
    result = outcome.synthesis
    document = Path(getattr(result, "document_path", None) or directory / settings.document_relpath)
    ledger_path = Path(getattr(result, "ledger_path", None) or directory / settings.ledger_relpath)
    document = document if document.is_absolute() else directory / document
    ledger_path = ledger_path if ledger_path.is_absolute() else directory / ledger_path
    text = document.read_text(encoding="utf-8") if document.exists() else ""
    table = _decision_table(text)
    say(f"synthesis: {_show(document)}" + (f" (decision table: {', '.join(f'{n} {k}' for k, n in table.items())})"
                                           if text else " (missing)"))
    counts: dict[str, int] = {}
    ledger_ok = False
    if ledger_path.exists():
        try:
            counts = _classes(json.loads(ledger_path.read_text(encoding="utf-8")))
            ledger_ok = True
        except ValueError:
            pass
    shown = ", ".join(f"{counts.get(k, 0)} {k}" for k in ("convergent", "divergent", "single-source"))
    say(f"claims ledger: {_show(ledger_path)}" + (f" (findings: {shown})" if ledger_ok else " (missing)"))
    return [
        Check("synthesis decision table shows ≥1 convergent, ≥1 divergent and ≥1 single-source finding",
              all(n >= 1 for n in table.values()), ", ".join(f"{n} {k}" for k, n in table.items())),
        Check("framework/claims.json written, with convergent, divergent and single-source findings",
              ledger_ok and all(counts.get(k, 0) >= 1 for k in ("convergent", "divergent", "single-source")),
              shown if ledger_ok else "missing or unreadable"),
    ]


def _methodology(directory: Path, settings: Any, legs: list[Any], say: Echo) -> list[Check]:
    path = directory / settings.methodology_path
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    match = re.search(r"<!-- research-dispatch:dispatch-table:start -->(.*?)"
                      r"<!-- research-dispatch:dispatch-table:end -->", text, re.DOTALL)
    table = match.group(1) if match else ""
    rows = [line for line in table.splitlines() if line.startswith("|")]
    missing = [leg.stem for leg in legs if not any(leg.report_relpath(settings) in row and leg.route.model in row
                                                   and "not yet run" not in row for row in rows)]
    say(f"methodology: {_show(path)} (dispatch table: {max(0, len(rows) - 2)} rows)")
    return [Check("docs/METHODOLOGY.md dispatch table lists every report with its served route", bool(match)
                  and not missing, f"not filled in: {', '.join(missing)}" if missing else "")]


def _trailers(text: str) -> dict[str, str]:
    found = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            found[key.strip()] = value.strip()
    return found


def _branch(directory: Path, settings: Any, legs: list[Any], outcome: Any, say: Echo) -> list[Check]:
    from research_dispatch.report import load_report

    publication = outcome.publication
    branch = getattr(publication, "branch", None) or f"{settings.pr.branch_prefix}{outcome.cycle}"
    base = settings.pr.base
    try:
        log = git(directory, "log", "--format=%h %s", f"{base}..{branch}")
        remote = git(directory, "ls-remote", "origin", f"refs/heads/{branch}").strip()
    except DispatchError as exc:
        say(f"branch {branch}: {exc}")
        return [Check("one commit per report with the trailers", False, f"no branch {branch}")]
    say(f"branch: {branch} ({len(log.splitlines())} commits on {base}; "
        f"{'pushed to origin' if remote else 'not on origin'})")
    for line in log.splitlines():
        say(f"  {line}")
    problems = []
    for leg in legs:
        report_path = directory / leg.report_relpath(settings)
        records = [r for r in git(directory, "log", "--format=%H%x1f%(trailers:only,unfold)%x1e", f"{base}..{branch}",
                                  "--", leg.report_relpath(settings)).split("\x1e") if r.strip()]
        if len(records) != 1:
            problems.append(f"{leg.stem}: {len(records)} commits")
            continue
        trailers = _trailers(records[0].split("\x1f", 1)[1])
        absent = [t for t in TRAILERS if t not in trailers]
        if absent:
            problems.append(f"{leg.stem}: no {', '.join(absent)}")
            continue
        if report_path.exists():
            meta = load_report(report_path, repo=directory).meta
            if trailers["Requested-Model"] != meta.requested_model or trailers["Route"] != meta.route:
                problems.append(f"{leg.stem}: trailers disagree with the report")
    return [Check("one commit per report carrying Requested-Model, Served-Model, Served-Provider, Route trailers",
                  not problems, "; ".join(problems)),
            Check("refresh branch pushed to the bare origin", bool(remote))]


def _pull_request(directory: Path, settings: Any, outcome: Any, pulls: list[dict[str, Any]],
                  say: Echo) -> list[Check]:
    publication = outcome.publication
    branch = getattr(publication, "branch", None) or f"{settings.pr.branch_prefix}{outcome.cycle}"
    mine = [p for p in pulls if (p.get("head") or {}).get("ref") == branch]
    if not mine:
        say(f"pull request: none for {branch} on the fake GitHub ({GITHUB_OWNER}/{GITHUB_NAME})")
        return [Check("one pull request opened on the fake GitHub", False, f"{len(pulls)} PRs, none for {branch}")]
    pr = mine[0]
    body = pr.get("body") or ""
    body_path = getattr(publication, "body_path", None)
    body_file = Path(body_path) if body_path else directory / settings.build_dir / "pr-body.md"
    body_file = body_file if body_file.is_absolute() else directory / body_file
    if not body_file.exists():
        body_file.parent.mkdir(parents=True, exist_ok=True)
        body_file.write_text(body, encoding="utf-8")
    say(f"pull request: #{pr['number']} “{pr.get('title')}” on the fake GitHub {GITHUB_OWNER}/{GITHUB_NAME} "
        f"({'draft' if pr.get('draft') else 'ready for review'}, {pr.get('state')}, "
        f"labels: {', '.join(label['name'] for label in pr.get('labels') or []) or 'none'}), "
        f"{pr['head']['ref']} → {pr['base']['ref']}")
    say(f"PR body: {_show(body_file)} ({len(body):,} characters); first {PR_BODY_PREVIEW_LINES} lines:")
    lines = body.splitlines()
    for line in lines[:PR_BODY_PREVIEW_LINES]:
        say(f"  │ {line}")
    if len(lines) > PR_BODY_PREVIEW_LINES:
        say(f"  │ … ({len(lines) - PR_BODY_PREVIEW_LINES} more lines)")
    return [Check("one pull request opened on the fake GitHub", len(mine) == 1 and len(pulls) == 1
                  and pr.get("state") == "open", f"#{pr['number']}, {'draft' if pr.get('draft') else 'ready'}")]
