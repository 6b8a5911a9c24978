"""`research-dispatch init`: what it writes, that a second run changes nothing, that an existing
pyproject keeps every line, `--force`, and how the pin is chosen. Refusals (exit 2): test_init_faults.py.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from research_dispatch import __version__
from research_dispatch.adopt.init import (
    UPSTREAM,
    Action,
    commit_from_direct_url,
    init_repository,
    plan_pyproject,
    resolve_pin,
)
from research_dispatch.config.plan import plan_legs
from research_dispatch.config.settings import load_settings
from research_dispatch.config.topics import load_topics
from tests.adopt.conftest import empty_repository, git, git_env, snapshot
from tests.clirun import CliRun, run_cli
from tests.conftest import ROOT
from tests.profiles import examples

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

SHA = "a" * 40


def cli(*args: str, cwd: Path) -> CliRun:
    """The CLI run in `cwd` with an adopter's git identity (in process: tests/clirun.py)."""
    return run_cli(*args, env=git_env(), cwd=cwd)


def test_init_sets_up_an_empty_repository(tmp_path: Path) -> None:
    repo = empty_repository(tmp_path / "review")
    done = cli("init", "--ref", SHA, cwd=repo)
    assert done.code == 0, done.stderr
    settings = load_settings(repo)
    assert settings.framework_name == "synthesis" and settings.synthesis.judge_models[0] == "x-ai/grok-4"
    legs = plan_legs(load_topics(repo, settings), settings)
    families = {settings.family_of(leg.route.model) for leg in legs}
    assert len(legs) == 2 and len(families) == 2  # one example topic, two models of different families
    assert not families & {settings.family_of(settings.synthesis.judge_models[0])}  # an independent judge
    methodology = (repo / "docs/METHODOLOGY.md").read_text(encoding="utf-8")
    assert "<!-- research-dispatch:dispatch-table:start -->" in methodology
    assert "<!-- research-dispatch:dispatch-table:end -->" in methodology
    assert (repo / "research/.gitkeep").read_bytes() == b"" and (repo / "framework/.gitkeep").read_bytes() == b""
    assert (repo / ".gitignore").read_text(encoding="utf-8") == "build/\n"
    pyproject = (repo / "pyproject.toml").read_text(encoding="utf-8")
    assert pyproject.startswith("# research-dispatch:") and "[project]" not in pyproject  # minimal: the table
    for name in ("research-refresh.yml", "research-refresh-schedule.yml"):
        workflow = (repo / ".github/workflows" / name).read_text(encoding="utf-8")
        assert f"uses: {UPSTREAM}/.github/workflows/research-refresh.yml@{SHA} # v{__version__}" in workflow
    assert cli("check", cwd=repo).code == 0
    umask = os.umask(0)
    os.umask(umask)
    for path in ("pyproject.toml", "topics/01-example.yaml", ".github/workflows/research-refresh.yml"):
        assert (repo / path).stat().st_mode & 0o777 == 0o666 & ~umask  # like any new file, not 0600


def test_init_twice_changes_nothing(tmp_path: Path) -> None:
    repo = empty_repository(tmp_path / "review")
    init_repository(repo, ref=SHA)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "research-dispatch init")
    before = snapshot(repo)
    _, _, outcomes = init_repository(repo, ref=SHA)
    assert {o.action for o in outcomes} <= {Action.UNCHANGED, Action.KEPT}
    assert snapshot(repo) == before  # not a byte, not an mtime
    assert git(repo, "status", "--porcelain", "--untracked-files=all") == ""
    done = cli("init", "--ref", SHA, cwd=repo)
    assert done.code == 0 and "nothing to do" in done.stdout
    assert snapshot(repo) == before


EXISTING = (
    '# My project\r\n'
    '[project]\r\n'
    'name = "my-review"\r\n'
    'version = "2.0"  # keep me\r\n'
    '\r\n'
    '[tool.ruff]\r\n'
    'line-length = 99\r\n'
    '[tool.other]\r\n'
    'x = "é — ünïcode"\r\n'
    '# a last comment without a newline'
)


def test_an_existing_pyproject_keeps_every_line_byte_for_byte(tmp_path: Path) -> None:
    repo = empty_repository(tmp_path / "review")
    (repo / "pyproject.toml").write_bytes(EXISTING.encode("utf-8"))
    init_repository(repo, ref=SHA)
    after = (repo / "pyproject.toml").read_bytes()
    original_lines = EXISTING.encode("utf-8").split(b"\r\n")
    assert after.split(b"\r\n")[: len(original_lines)] == original_lines
    assert b"\n" not in after.replace(b"\r\n", b"")  # the file's own line endings throughout
    data = tomllib.loads(after.decode("utf-8"))
    assert data["project"] == {"name": "my-review", "version": "2.0"} and data["tool"]["ruff"] == {"line-length": 99}
    assert "research-dispatch" in data["tool"]
    before = (repo / "pyproject.toml").read_bytes()
    init_repository(repo, ref=SHA, force=True)  # --force never rewrites pyproject.toml's content either
    assert (repo / "pyproject.toml").read_bytes() == before


def test_a_pyproject_with_its_own_table_is_not_touched(tmp_path: Path) -> None:
    repo = empty_repository(tmp_path / "review")
    text = '[tool.research-dispatch]\nframework_name = "mine"\ntopics_dir = "review/topics"\n'
    (repo / "pyproject.toml").write_text(text, encoding="utf-8")
    _, _, outcomes = init_repository(repo, ref=SHA)
    assert (repo / "pyproject.toml").read_text(encoding="utf-8") == text
    assert (repo / "review/topics/01-example.yaml").is_file()  # paths follow the configuration
    assert any(o.relpath == "pyproject.toml" and o.action is Action.KEPT for o in outcomes)


_TABLE_NAME = st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True).filter(lambda n: n not in ("tool", "project"))
_VALUE = st.one_of(st.integers(-10**6, 10**6), st.booleans(),
                   st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), max_size=12))


@st.composite
def pyprojects(draw: st.DrawFn) -> str:
    """TOML documents a person might have: tables, [tool.*] tables, comments, blank lines, either line
    ending, with or without a final newline."""
    lines: list[str] = []
    if draw(st.booleans()):
        lines += ["[project]", 'name = "x"']
    for index, name in enumerate(draw(st.lists(_TABLE_NAME, unique=True, max_size=4))):
        lines.append(f"[tool.{name}]" if index % 2 == 0 else f"[{name}]")
        for key, value in draw(st.dictionaries(_TABLE_NAME, _VALUE, max_size=3)).items():
            lines.append(f"{key} = {value!r}".replace("True", "true").replace("False", "false")
                         if not isinstance(value, str) else f"{key} = {tomllib_string(value)}")
        if draw(st.booleans()):
            lines.append("# " + draw(st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")),
                                             max_size=20)))
        if draw(st.booleans()):
            lines.append("")
    newline = draw(st.sampled_from(["\n", "\r\n"]))
    return newline.join(lines) + (newline if draw(st.booleans()) else "")


def tomllib_string(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(existing=pyprojects())
def test_any_existing_pyproject_is_kept_as_a_prefix_and_still_parses_the_same(tmp_path: Path, existing: str) -> None:
    """The planner alone (no git, no write): what init would write starts with every existing byte (plus at
    most the missing final newline), and the document means what it meant, plus the table."""
    repo = tmp_path / "r"
    repo.mkdir(exist_ok=True)
    (repo / "pyproject.toml").write_bytes(existing.encode("utf-8"))
    write, _, table = plan_pyproject(repo, None)
    assert write is not None and table
    after = write.data.decode("utf-8")
    assert after.startswith(existing)
    before_data, after_data = tomllib.loads(existing), tomllib.loads(after)
    added = after_data["tool"].pop("research-dispatch")
    if not after_data["tool"]:
        del after_data["tool"]
    assert after_data == before_data and added == table


def test_force_overwrites_generated_files_that_differ_and_nothing_else(tmp_path: Path) -> None:
    repo = empty_repository(tmp_path / "review")
    init_repository(repo, ref=SHA)
    workflow = repo / ".github/workflows/research-refresh.yml"
    workflow.write_text(workflow.read_text(encoding="utf-8") + "# my edit\n", encoding="utf-8")
    (repo / ".gitignore").write_text("build/\n*.log\n", encoding="utf-8")
    _, _, outcomes = init_repository(repo, ref=SHA)
    kept = {o.relpath: o for o in outcomes}[".github/workflows/research-refresh.yml"]
    assert kept.action is Action.KEPT and "--force" in kept.note
    assert workflow.read_text(encoding="utf-8").endswith("# my edit\n")
    other = "b" * 40
    _, _, outcomes = init_repository(repo, ref=other, force=True)
    actions = {o.relpath: o.action for o in outcomes}
    assert actions[".github/workflows/research-refresh.yml"] is Action.OVERWRITTEN
    assert actions[".github/workflows/research-refresh-schedule.yml"] is Action.OVERWRITTEN  # the new pin
    assert "# my edit" not in workflow.read_text(encoding="utf-8") and f"@{other} " in workflow.read_text()
    assert (repo / ".gitignore").read_text(encoding="utf-8") == "build/\n*.log\n"


def test_a_repository_with_topics_gets_no_example(tmp_path: Path) -> None:
    repo = empty_repository(tmp_path / "review")
    (repo / "topics").mkdir()
    (repo / "topics/01-mine.yaml").write_bytes((ROOT / "topics/02-diloco-family.yaml").read_bytes())
    init_repository(repo, ref=SHA)
    assert sorted(p.name for p in (repo / "topics").iterdir()) == ["01-mine.yaml"]


def test_gitignore_gets_build_appended_in_its_own_line_endings(tmp_path: Path) -> None:
    repo = empty_repository(tmp_path / "review")
    (repo / ".gitignore").write_bytes(b"*.pyc\r\n.venv/")
    init_repository(repo, ref=SHA)
    assert (repo / ".gitignore").read_bytes() == b"*.pyc\r\n.venv/\r\nbuild/\r\n"


def test_the_pr_base_follows_the_repositorys_branch(tmp_path: Path) -> None:
    repo = empty_repository(tmp_path / "review", branch="trunk")
    init_repository(repo, ref=SHA)
    assert load_settings(repo).pr.base == "trunk"
    repo = empty_repository(tmp_path / "other", branch="main")
    init_repository(repo, ref=SHA)
    assert load_settings(repo).pr.base == "main" and "\n[tool.research-dispatch.pr]" not in \
        (repo / "pyproject.toml").read_text(encoding="utf-8")


def test_the_example_topic_and_config_match_the_shipped_schemas(tmp_path: Path) -> None:
    import json

    import jsonschema

    repo = empty_repository(tmp_path / "review")
    init_repository(repo, ref=SHA)
    schemas = ROOT / "scripts/research_dispatch/config/schemas"
    topic_schema = json.loads((schemas / "topic.schema.json").read_text(encoding="utf-8"))
    jsonschema.validate(yaml.safe_load((repo / "topics/01-example.yaml").read_text(encoding="utf-8")), topic_schema)
    config_schema = json.loads((schemas / "config.schema.json").read_text(encoding="utf-8"))
    table = tomllib.loads((repo / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["research-dispatch"]
    jsonschema.validate(table, config_schema)


# -- the pin ----------------------------------------------------------------------------------------
def test_the_pin_prefers_ref_then_the_installed_commit_then_the_release_tag() -> None:
    vcs = ('{"url": "https://github.com/ada/research-dispatch.git", "vcs_info": {"vcs": "git", '
           f'"commit_id": "{"c" * 40}", "requested_revision": "v{__version__}"}}}}')
    assert resolve_pin(SHA, direct_url=vcs).ref == SHA
    pin = resolve_pin(direct_url=vcs)
    assert (pin.repository, pin.ref, pin.is_commit) == ("ada/research-dispatch", "c" * 40, True)
    wheel = '{"url": "file:///tmp/research_dispatch-0.1.0-py3-none-any.whl", "archive_info": {}}'
    pin = resolve_pin(direct_url=wheel, built="e" * 40)  # the build recorded its commit (setup.py)
    assert (pin.repository, pin.ref, pin.is_commit) == (UPSTREAM, "e" * 40, True)
    assert pin.how == "the commit this package was built from"
    assert resolve_pin(direct_url=vcs, built="e" * 40).ref == "c" * 40  # a git-URL install knows its repository
    pin = resolve_pin(direct_url=wheel, built="")  # neither: the release tag
    assert (pin.repository, pin.ref, pin.is_commit) == (UPSTREAM, f"v{__version__}", False)
    assert resolve_pin(upstream="fork/research-dispatch", direct_url="").uses.startswith("fork/research-dispatch/")


@pytest.mark.parametrize(("text", "expected"), [
    ('{"url": "https://github.com/o/n", "vcs_info": {"vcs": "git", "commit_id": "' + "d" * 40 + '"}}',
     ("o/n", "d" * 40)),
    ('{"url": "git@github.com:o/n.git", "vcs_info": {"vcs": "git", "commit_id": "' + "d" * 40 + '"}}',
     ("o/n", "d" * 40)),
    ('{"url": "ssh://git@github.com/o/n.git", "vcs_info": {"vcs": "git", "commit_id": "' + "d" * 40 + '"}}',
     ("o/n", "d" * 40)),
    ('{"url": "file:///srv/clone", "vcs_info": {"vcs": "git", "commit_id": "' + "d" * 40 + '"}}', None),
    ('{"url": "https://gitlab.com/o/n", "vcs_info": {"vcs": "git", "commit_id": "' + "d" * 40 + '"}}', None),
    ('{"url": "https://github.com/o/n", "vcs_info": {"vcs": "hg", "commit_id": "' + "d" * 40 + '"}}', None),
    ('{"url": "https://github.com/o/n", "vcs_info": {"vcs": "git", "commit_id": "abc123"}}', None),
    ('{"url": "https://github.com/o/n/../../evil", "vcs_info": {"vcs": "git", "commit_id": "' + "d" * 40 + '"}}',
     None),
    ("not json", None), ("[]", None), ("", None), (None, None),
])
def test_the_installed_commit_is_read_only_from_a_github_git_install(text: str | None,
                                                                     expected: tuple[str, str] | None) -> None:
    assert commit_from_direct_url(text) == expected
