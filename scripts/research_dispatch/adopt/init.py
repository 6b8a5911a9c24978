"""`init`: make an existing git repository a research-dispatch review in one command.

What it writes, each at a path computed here (relative to the repository's top level, through
`fsio.confined`, so a symlink cannot steer a write elsewhere) and each atomically:

* `pyproject.toml`: a commented `[tool.research-dispatch]` table. An existing file is never rewritten:
  the table is *appended* when absent (every existing byte stays as it was), and the file is left alone
  when it already has one. Without a pyproject, a minimal one holding only the table is created;
* one example topic (`topics/01-example.yaml`, two models of different families), unless the topics
  folder already has topics;
* the caller workflows, `.github/workflows/research-refresh.yml` (manual dispatch) and
  `research-refresh-schedule.yml` (the six-monthly wrapper), both calling research-dispatch's reusable
  workflow pinned to the installed version (see `resolve_pin`);
* `research/` and `framework/` placeholders (`.gitkeep`), `docs/METHODOLOGY.md` with the dispatch-table
  markers, and `build/` in `.gitignore` (appended);
* `.github/dependabot.yml` for the `github-actions` ecosystem (the workflows' pins kept fresh), unless the
  repository has its own (then kept, even with --force: init says if it lacks github-actions).

Idempotent: a file whose content is already what init would write is not touched (not even its mtime);
a generated file that differs is kept unless `--force`, which overwrites the generated files (never
pyproject.toml's existing content, `.gitignore`'s lines or anything in research/ and framework/).
Everything is planned and checked before the first write, so a refusal leaves the repository unchanged.
"""

from __future__ import annotations

import datetime as dt
import importlib.metadata
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from importlib import resources
from pathlib import Path

from research_dispatch import __version__
from research_dispatch.config.schedule import ENABLE_COMMAND, INACTIVITY_DAYS, SCHEDULE_WORKFLOW, outlook, read_crons
from research_dispatch.config.settings import Settings, load_settings
from research_dispatch.core.build_info import built_commit
from research_dispatch.core.errors import BadInput, ExitCode
from research_dispatch.core.fsio import confined, write_atomic
from research_dispatch.core.gitref import valid_branch_name

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

Echo = Callable[[str], None]

# Where research-dispatch lives on GitHub (pyproject.toml's [project.urls] says the same; a test checks).
UPSTREAM = "research-dispatch/research-dispatch"
DIST_NAME = "research-dispatch"
REUSABLE_WORKFLOW = ".github/workflows/research-refresh.yml"
CALLER_WORKFLOWS = (".github/workflows/research-refresh.yml", ".github/workflows/research-refresh-schedule.yml")
EXAMPLE_TOPIC = "01-example.yaml"
DEPENDABOT = ".github/dependabot.yml"

FULL_SHA = re.compile(r"[0-9a-f]{40}")
_SHORT_SHA = re.compile(r"[0-9a-f]{7,39}")
_REPOSITORY = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]{1,100}")
_GITHUB_URL = re.compile(r"^(?:git\+)?(?:https://|ssh://git@|git@)github\.com[/:]"
                         r"(?P<repo>[A-Za-z0-9][A-Za-z0-9-]{0,38}/[A-Za-z0-9._-]{1,100}?)(?:\.git)?/?$")
_TOKEN = re.compile(r"<<[A-Z_]+>>")


class Action(str, Enum):
    """What init did to one path."""

    CREATED = "created"
    APPENDED = "appended"  # added to an existing file; its previous bytes are unchanged
    OVERWRITTEN = "overwritten"  # --force
    UNCHANGED = "unchanged"  # already exactly what init writes
    KEPT = "kept"  # exists and differs (or is the user's); left alone


@dataclass(frozen=True)
class Pin:
    """The research-dispatch commit (or tag) the caller workflows call, and how it was chosen."""

    repository: str
    ref: str
    version: str
    how: str

    @property
    def is_commit(self) -> bool:
        return bool(FULL_SHA.fullmatch(self.ref))

    @property
    def uses(self) -> str:
        return f"{self.repository}/{REUSABLE_WORKFLOW}@{self.ref}"


@dataclass(frozen=True)
class Outcome:
    relpath: str
    action: Action
    note: str = ""


@dataclass(frozen=True)
class _Write:
    relpath: str
    data: bytes
    action: Action
    note: str = ""


# ----------------------------------------------------------------------------------------------
# The repository


def _git(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update({"GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"})
    try:
        return subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=False,
                              timeout=60)
    except FileNotFoundError:
        raise BadInput("init needs the `git` command; install git and run it again", path="--repo") from None


def find_repository(path: Path) -> Path:
    """The top level of the git work tree at `path`; refuse anything else (exit 2)."""
    shown = str(path)
    if not path.is_dir():
        raise BadInput(f"{shown} is not a directory", path="--repo")
    done = _git(path, "rev-parse", "--is-inside-work-tree", "--show-toplevel")
    lines = done.stdout.split("\n")
    if done.returncode != 0 or not lines or lines[0].strip() != "true" or len(lines) < 2 or not lines[1].strip():
        raise BadInput(f"{shown} is not inside a git work tree; run `git init` first (init only writes into an "
                       "existing git repository)", path="--repo")
    top = Path(lines[1].strip()).resolve()
    if top != path.resolve():
        raise BadInput(f"{shown} is inside the git repository {top}; run init at its top level "
                       f"(--repo {top}), where .github/workflows/ must live", path="--repo")
    return top


def default_branch(repo: Path) -> str | None:
    """The branch a refresh PR should target: origin's HEAD branch, else the current branch."""
    for args in (("symbolic-ref", "--quiet", "--short", "refs/remotes/origin/HEAD"),
                 ("symbolic-ref", "--quiet", "--short", "HEAD")):
        done = _git(repo, *args)
        name = done.stdout.strip().removeprefix("origin/") if done.returncode == 0 else ""
        if valid_branch_name(name):
            return name
    return None


# ----------------------------------------------------------------------------------------------
# The pin


def validate_ref(ref: str) -> str:
    if FULL_SHA.fullmatch(ref):
        return ref
    if _SHORT_SHA.fullmatch(ref):
        raise BadInput(f"{ref!r} looks like an abbreviated commit; give the full 40-character sha", path="--ref")
    if not valid_branch_name(ref):  # a tag name: the same rules as a branch's
        raise BadInput(f"{ref!r} is neither a full commit sha nor a tag name", path="--ref")
    return ref


def validate_repository(value: str) -> str:
    if not _REPOSITORY.fullmatch(value) or value.endswith((".", ".git")):
        raise BadInput(f"{value!r} is not a GitHub repository name owner/name", path="--upstream")
    return value


def commit_from_direct_url(text: str | None) -> tuple[str, str] | None:
    """(owner/name, commit) when the package was installed from a GitHub git URL (PEP 610 direct_url.json).

    `pip install git+https://github.com/o/n@v1.2.0`, `pipx run --spec git+...` and `uvx --from git+...`
    record the exact commit they built; a wheel from an index records none.
    """
    if not text:
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    vcs = data.get("vcs_info")
    url = data.get("url")
    if not isinstance(vcs, dict) or vcs.get("vcs") != "git" or not isinstance(url, str):
        return None
    commit = vcs.get("commit_id")
    match = _GITHUB_URL.match(url)
    if not isinstance(commit, str) or not FULL_SHA.fullmatch(commit) or match is None:
        return None
    return match.group("repo"), commit


def _installed_direct_url() -> str | None:
    try:
        return importlib.metadata.distribution(DIST_NAME).read_text("direct_url.json")
    except importlib.metadata.PackageNotFoundError:
        return None


def resolve_pin(ref: str | None = None, upstream: str | None = None, *, direct_url: str | None = None,
                built: str | None = None) -> Pin:
    """What the caller workflows call: `--ref`; else the commit the package was installed from (when it
    came from a GitHub git URL); else the commit the wheel or sdist was built from (`build_info`); else
    the release tag `v<version>`, which works but is not a commit pin (zizmor's unpinned-uses flags it),
    so init says how to replace it. `direct_url` and `built` default to what this installation records;
    an empty string stands for "none recorded"."""
    repository = validate_repository(upstream) if upstream else None
    if ref:
        return Pin(repository or UPSTREAM, validate_ref(ref), __version__, "--ref")
    installed = commit_from_direct_url(direct_url if direct_url is not None else _installed_direct_url())
    if installed is not None and (repository is None or repository == installed[0]):
        return Pin(installed[0], installed[1], __version__, "the commit this package was installed from")
    commit = built_commit() if built is None else built
    if commit:
        return Pin(repository or UPSTREAM, commit, __version__, "the commit this package was built from")
    return Pin(repository or UPSTREAM, f"v{__version__}", __version__, "the release tag of the installed version")


# ----------------------------------------------------------------------------------------------
# Templates


def template(name: str) -> str:
    return (resources.files("research_dispatch.adopt") / "templates" / name).read_text(encoding="utf-8")


def render(name: str, values: dict[str, str]) -> str:
    text = template(name)
    for key, value in values.items():
        text = text.replace(f"<<{key}>>", value)
    left = _TOKEN.search(text)
    if left:  # a template/code mismatch is our bug, not the user's input
        raise RuntimeError(f"template {name}: {left.group(0)} was not filled in")
    return text


def pyproject_table(base: str | None) -> str:
    if base and base != "main":
        pr = (f"\n# The refresh pull request targets this branch (init found it in the repository).\n"
              f"[tool.research-dispatch.pr]\nbase = \"{base}\"\n"
              f"# labels = [\"research-refresh\", \"automated\"]\n# reviewers = []\n")
    else:
        pr = ("\n# The refresh pull request.\n# [tool.research-dispatch.pr]\n# base = \"main\"\n"
              "# labels = [\"research-refresh\", \"automated\"]\n# reviewers = []\n")
    return render("pyproject-table.toml", {"PR_TABLE": pr}).rstrip("\n") + "\n"


def workflow_text(name: str, pin: Pin) -> str:
    comment = f"v{pin.version}" if pin.is_commit else \
        f"not a commit pin: replace {pin.ref} with its full commit sha (see docs/WORKFLOWS.md)"
    return render(f"workflows/{name}", {"UPSTREAM": pin.repository, "REF": pin.ref, "REF_COMMENT": comment,
                                        "VERSION": pin.version})


# ----------------------------------------------------------------------------------------------
# Planning


def _newline(text: str) -> str:
    return "\r\n" if "\r\n" in text else "\n"


def _read_text(path: Path, shown: str) -> str:
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise BadInput("is not UTF-8 text; init leaves it alone", path=shown) from None


def _append(existing: str, addition: str) -> str:
    """`existing` unchanged, then `addition` in the file's own line endings, after a blank line."""
    newline = _newline(existing)
    text = existing
    if text and not text.endswith("\n"):
        text += newline
    if text.strip():
        text += newline
    return text + addition.replace("\n", newline)


def plan_pyproject(repo: Path, base: str | None) -> tuple[_Write | None, Outcome | None, dict[str, object]]:
    """The pyproject step, and the `[tool.research-dispatch]` table as it will be after init."""
    path = repo / "pyproject.toml"
    table_text = pyproject_table(base)
    if not path.exists():
        text = table_text
        data = tomllib.loads(text)
        return _Write("pyproject.toml", text.encode("utf-8"), Action.CREATED, "a minimal one holding "
                      "[tool.research-dispatch]"), None, data["tool"]["research-dispatch"]
    existing = _read_text(path, "pyproject.toml")
    try:
        data = tomllib.loads(existing)
    except tomllib.TOMLDecodeError as exc:
        raise BadInput(f"invalid TOML ({exc}); fix it, then run init again (init never rewrites it)",
                       path="pyproject.toml") from None
    tool = data.get("tool", {})
    if isinstance(tool, dict) and "research-dispatch" in tool:
        table = tool["research-dispatch"]
        if not isinstance(table, dict):
            raise BadInput("must be a table", path="pyproject.toml", field="tool.research-dispatch")
        return None, Outcome("pyproject.toml", Action.KEPT, "already has [tool.research-dispatch]"), table
    text = _append(existing, table_text)
    try:
        after = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise BadInput(f"a [tool.research-dispatch] table cannot be added to this file ({exc}); add it by hand "
                       "(README: Configuration)", path="pyproject.toml") from None
    return _Write("pyproject.toml", text.encode("utf-8"), Action.APPENDED, "[tool.research-dispatch] added at "
                  "the end; every existing line kept"), None, after["tool"]["research-dispatch"]


def _generated(repo: Path, relpath: str, text: str, force: bool) -> tuple[_Write | None, Outcome | None]:
    path = repo / relpath
    data = text.encode("utf-8")
    if not path.exists():
        return _Write(relpath, data, Action.CREATED), None
    if path.is_file() and not path.is_symlink() and path.read_bytes() == data:
        return None, Outcome(relpath, Action.UNCHANGED)
    if not force:
        return None, Outcome(relpath, Action.KEPT, "differs from what init writes; --force overwrites it")
    if not path.is_file():
        raise BadInput("exists and is not a regular file; init will not overwrite it", path=relpath)
    return _Write(relpath, data, Action.OVERWRITTEN), None


def _dependabot(repo: Path) -> tuple[_Write | None, Outcome | None]:
    """`.github/dependabot.yml` for the `github-actions` ecosystem, which keeps the workflows' commit pins
    fresh. An existing file is the repository's own configuration (other ecosystems, its own schedule):
    it is never overwritten, not even by --force; init says when it lacks a github-actions entry."""
    text = template("dependabot.yml")
    path = repo / DEPENDABOT
    if not path.exists():
        return _Write(DEPENDABOT, text.encode("utf-8"), Action.CREATED, "keeps the workflow pins fresh"), None
    existing = _read_text(path, DEPENDABOT)
    if existing == text:
        return None, Outcome(DEPENDABOT, Action.UNCHANGED)
    if "github-actions" in existing:
        return None, Outcome(DEPENDABOT, Action.KEPT, "yours; it already updates github-actions")
    return None, Outcome(DEPENDABOT, Action.KEPT, "yours; add a `package-ecosystem: github-actions` entry so "
                         "that Dependabot keeps the workflow pins fresh")


def _topic_files(directory: Path) -> list[str]:
    if not directory.is_dir():
        return []
    return sorted(p.name for p in directory.iterdir() if p.suffix in (".yaml", ".yml") and not p.name.startswith("."))


def _gitignore(repo: Path, build_dir: str) -> tuple[_Write | None, Outcome | None]:
    entry = build_dir.strip("/") + "/"
    path = repo / ".gitignore"
    if not path.exists():
        return _Write(".gitignore", f"{entry}\n".encode(), Action.CREATED, f"ignores {entry}"), None
    existing = _read_text(path, ".gitignore")
    accepted = {entry, entry.rstrip("/"), "/" + entry, "/" + entry.rstrip("/")}
    if any(line.strip() in accepted for line in existing.splitlines()):
        return None, Outcome(".gitignore", Action.UNCHANGED, f"already ignores {entry}")
    newline = _newline(existing)
    text = existing + ("" if not existing or existing.endswith("\n") else newline) + entry + newline
    return _Write(".gitignore", text.encode("utf-8"), Action.APPENDED, f"{entry} added"), None


def _placeholder(repo: Path, directory: str) -> tuple[_Write | None, Outcome | None]:
    path = repo / directory
    if (path / ".gitkeep").is_file():
        return None, Outcome(f"{directory}/.gitkeep", Action.UNCHANGED)
    if path.is_dir() and any(path.iterdir()):
        return None, Outcome(f"{directory}/", Action.UNCHANGED, "has files")
    return _Write(f"{directory}/.gitkeep", b"", Action.CREATED, "placeholder until the first refresh"), None


def plan(repo: Path, pin: Pin, *, force: bool) -> tuple[list[_Write], list[Outcome]]:
    """Every write init would make, and what it leaves alone; nothing is written here."""
    writes: list[_Write] = []
    outcomes: list[Outcome] = []

    def add(step: tuple[_Write | None, Outcome | None]) -> None:
        write, outcome = step
        if write is not None:
            writes.append(write)
        if outcome is not None:
            outcomes.append(outcome)

    pyproject_write, pyproject_outcome, table = plan_pyproject(repo, default_branch(repo))
    add((pyproject_write, pyproject_outcome))
    # the user's own table is validated as `check` does (same message); ours is valid by construction
    settings = load_settings(repo) if pyproject_write is None else Settings.model_validate(table)

    topics = _topic_files(repo / settings.topics_dir)
    example = f"{settings.topics_dir}/{EXAMPLE_TOPIC}"
    if topics and EXAMPLE_TOPIC not in topics:
        outcomes.append(Outcome(f"{settings.topics_dir}/", Action.KEPT, f"has {len(topics)} topic file(s); no "
                                "example added"))
    else:
        add(_generated(repo, example, template("topic-example.yaml"), force))
    for relpath in CALLER_WORKFLOWS:
        add(_generated(repo, relpath, workflow_text(Path(relpath).name, pin), force))
    add(_generated(repo, settings.methodology_path, template("METHODOLOGY.md"), force))
    add(_placeholder(repo, settings.research_dir))
    add(_placeholder(repo, settings.framework_dir))
    add(_gitignore(repo, settings.build_dir))
    add(_dependabot(repo))
    for write in writes:  # every target is checked before the first write: a refusal changes nothing
        confined(repo, write.relpath)
        parent = (repo / write.relpath).parent
        while parent != repo and not parent.exists():
            parent = parent.parent
        if not parent.is_dir():
            raise BadInput(f"{parent.relative_to(repo)} is not a directory", path=write.relpath)
    return writes, outcomes


# ----------------------------------------------------------------------------------------------
# The command


def _write(repo: Path, write: _Write) -> None:
    path = repo / write.relpath
    mode = path.stat().st_mode & 0o7777 if path.is_file() else 0o666 & ~_umask()
    target = write_atomic(path, write.data, root=repo)
    os.chmod(target, mode)


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


def init_repository(repo: Path, *, ref: str | None = None, upstream: str | None = None,
                    force: bool = False) -> tuple[Path, Pin, list[Outcome]]:
    """Scaffold the repository at `repo`; returns its top level, the pin and what happened to each path."""
    top = find_repository(repo)
    pin = resolve_pin(ref, upstream)
    writes, kept = plan(top, pin, force=force)
    for write in writes:
        _write(top, write)
    done = [Outcome(w.relpath, w.action, w.note) for w in writes] + kept
    return top, pin, sorted(done, key=lambda o: o.relpath)


def _shell_path(repo: Path) -> str:
    try:
        relative = repo.resolve().relative_to(Path.cwd().resolve())
    except ValueError:
        return str(repo)
    return "." if str(relative) == "." else str(relative)


def schedule_steps(repo: Path, now: dt.datetime | None = None) -> list[str]:
    """The schedule's dates, told at the start (issue 30.1): the first cycle, and the day GitHub pauses the
    schedule if nothing happens in the repository after today, with the one command that re-enables it."""
    now = now or dt.datetime.now(dt.timezone.utc)
    view = outlook(read_crons(repo), now.date(), now)
    before = ", before that cycle" if view.pauses_first else ""
    return [
        f"  5. The schedule ({SCHEDULE_WORKFLOW}) runs the first cycle {view.next_cycle()}.",
        f"     GitHub pauses a public repository's schedule after {INACTIVITY_DAYS} days without activity: if nothing",
        f"     is pushed after today, on {view.pauses_on:%Y-%m-%d}{before}. Re-enable it then (the refresh PRs and",
        "     `research-dispatch check --online` say when) with:",
        f"       {ENABLE_COMMAND}",
    ]


def next_steps(repo: Path, pin: Pin, now: dt.datetime | None = None) -> list[str]:
    where = _shell_path(repo)
    flag = "" if where == "." else f" --repo {where}"
    lines = [
        "next steps:",
        "  1. Set the repository secrets the refresh needs (Settings → Secrets and variables → Actions):",
        "       gh secret set OPENROUTER_API_KEY",
        "       gh secret set TAVILY_API_KEY",
        "     Recommended: a GitHub App (variable REFRESH_APP_CLIENT_ID, secret REFRESH_APP_PRIVATE_KEY); without",
        "     one, enable Settings → Actions → General → \"Allow GitHub Actions to create and approve pull requests\".",
        f"  2. Edit {EXAMPLE_TOPIC} in topics/ (or add your own topics), then validate:",
        f"       research-dispatch check{flag}",
        "  3. See your review's shape offline, on built-in fake servers (no keys, no cost):",
        f"       research-dispatch demo --repo {where}",
        "  4. Commit, push, and start a dry run (free: the plan, every key and model checked, the cost estimate;",
        "     no leg runs). `-f publish=false` instead runs the paid legs and the synthesis without a PR:",
        f"       {'' if where == '.' else f'cd {where} && '}gh workflow run research-refresh.yml -f dry-run=true",
        *schedule_steps(repo, now),
    ]
    if not pin.is_commit:
        lines += [
            "",
            f"warning: the workflows call {pin.uses}, a tag, not a commit ({pin.how}).",
            "  A tag can be moved; pin the commit (zizmor's unpinned-uses flags the tag). Look it up with",
            f"       gh api repos/{pin.repository}/commits/{pin.ref} --jq .sha",
            f"  and replace @{pin.ref} in both workflow files (keep a `# v{pin.version}` comment), or run",
            f"       research-dispatch init{flag} --force --ref <sha>   (before you edit the generated files).",
        ]
    return lines


def init_command(repo: Path, *, ref: str | None, upstream: str | None, force: bool, echo: Echo) -> ExitCode:
    top, pin, outcomes = init_repository(repo, ref=ref, upstream=upstream, force=force)
    echo(f"research-dispatch {__version__} init: {top}")
    echo(f"workflows call {pin.uses} ({pin.how})")
    width = max(len(a.value) for a in Action)
    for outcome in outcomes:
        echo(f"  {outcome.action.value:<{width}}  {outcome.relpath}" + (f" — {outcome.note}" if outcome.note else ""))
    if all(o.action in (Action.UNCHANGED, Action.KEPT) for o in outcomes):
        hint = "" if force else " (--force overwrites generated files that differ)"
        echo("nothing to do: the repository is already set up" + hint)
    echo("")
    for line in next_steps(top, pin):
        echo(line)
    return ExitCode.OK
