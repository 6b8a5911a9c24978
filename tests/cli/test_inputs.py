"""Exit 2 before any work, per command: one line on stderr naming the file (or variable, or option) and
the field, no traceback, nothing written — and `plan --github-output`'s happy path.

Cases already run elsewhere are not repeated here (tests/bounds/test_exit_contract.py:
runner files, empty selections, malformed keys and base URLs, damaged reports; tests/reliability/
test_bad_input.py: hostile topic files; tests/adopt: `init` and `demo --repo` outside a repository).
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.bounds.conftest import CYCLE, child_env, make_repo, one_error
from tests.cli.conftest import Fakes
from tests.clirun import run_cli


def test_check_names_the_pyproject_setting(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, ("02-",), extra_config='jobs = "many"\n')
    done = run_cli("check", "--repo", str(repo), env=child_env())
    assert done.code == 2 and done.stdout == "", done.output
    one_error(done.stderr, "pyproject.toml", "tool.research-dispatch.jobs", "expected a number")


def test_check_prints_one_line_per_bad_topic_file(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, ("02-", "04-"))
    diloco, verl = sorted((repo / "topics").glob("*.yaml"))
    diloco.write_text(diloco.read_text(encoding="utf-8").replace("id: diloco-family", "id: Diloco Family"))
    verl.write_text(verl.read_text(encoding="utf-8") + "budget: {max_steps: -1}\n")
    done = run_cli("check", "--repo", str(repo), env=child_env())
    assert done.code == 2 and done.stdout == "", done.output
    lines = done.stderr.splitlines()
    assert len(lines) == 2 and "Traceback" not in done.stderr, lines
    assert lines[0].startswith(f"error: topics/{diloco.name}: id:"), lines
    assert lines[1].startswith(f"error: topics/{verl.name}: budget.max_steps:"), lines


def test_plan_with_github_output_prints_and_appends_the_matrix(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    output = tmp_path / "github_output"
    output.write_text("earlier=kept\n", encoding="utf-8")
    done = run_cli("plan", "--repo", str(repo), "--github-output", env=child_env({"GITHUB_OUTPUT": str(output)}))
    assert done.code == 0 and done.stderr == "", done.output
    matrix = json.loads(done.stdout)
    assert [entry["topic"] for entry in matrix["include"]] == ["composer-2.5", "diloco-family",
                                                               "monarch-torchforge-openenv", "verl-trl",
                                                               "trace-replay-distillation"]
    lines = output.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "earlier=kept"
    assert _output_value(lines, "count") == "5" and _output_value(lines, "cycle") == CYCLE
    assert json.loads(_output_value(lines, "matrix")) == {"include": matrix["include"]}  # the matrix alone (30.7)


def _output_value(lines: list[str], name: str) -> str:
    """A value from a $GITHUB_OUTPUT file, written `name=value` or as a `name<<DELIMITER` block."""
    for index, line in enumerate(lines):
        if line.startswith(f"{name}="):
            return line.split("=", 1)[1]
        if line.startswith(f"{name}<<"):
            delimiter = line.split("<<", 1)[1]
            return "\n".join(lines[index + 1:lines.index(delimiter, index + 1)])
    raise AssertionError(f"{name} not in {lines}")


def test_plan_names_an_unknown_topic(tmp_path: Path) -> None:
    done = run_cli("plan", "--repo", str(make_repo(tmp_path)), "--topics", "diloco-family,nope", env=child_env())
    assert done.code == 2 and done.stdout == "", done.output
    one_error(done.stderr, "--topics", "unknown topic id(s): nope")


def test_research_names_an_unknown_topic(tmp_path: Path, fakes: Fakes) -> None:
    repo = make_repo(tmp_path, ("02-",))
    before = fakes.completions()
    done = run_cli("research", "nope", "--repo", str(repo), env=fakes.env())
    assert done.code == 2 and done.stdout == "", done.output
    one_error(done.stderr, "TOPIC", "unknown topic id 'nope'")
    assert fakes.completions() == before and not (repo / "research").exists()


def test_research_without_the_search_key_stops_before_any_call(tmp_path: Path, fakes: Fakes) -> None:
    """Tavily's client would silently go keyless: the key is required up front (docs/ARCHITECTURE.md
    § Environment — FIXED)."""
    repo = make_repo(tmp_path, ("02-",))
    env = fakes.env()
    del env["TAVILY_API_KEY"]
    before = fakes.completions()
    done = run_cli("research", "diloco-family", "--repo", str(repo), env=env)
    assert done.code == 2 and done.stdout == "", done.output
    one_error(done.stderr, "TAVILY_API_KEY", "is not set")
    assert fakes.completions() == before and fakes.tavily.calls == []
    assert not (repo / "research").exists()


def test_research_without_the_gateway_key_stops_before_any_call(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, ("02-",))
    done = run_cli("research", "diloco-family", "--repo", str(repo), env=child_env())
    assert done.code == 2 and done.stdout == "", done.output
    one_error(done.stderr, "OPENROUTER_API_KEY", "is not set")
    assert not (repo / "research").exists()


def test_verify_and_synthesize_without_reports_name_the_folder(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, ("02-",))
    for command, what in (("verify", "verify"), ("synthesize", "synthesize")):
        done = run_cli(command, "--repo", str(repo), env=child_env())
        assert done.code == 2 and done.stdout == "", done.output
        one_error(done.stderr, "research/", f"no reports to {what}")
    assert not (repo / "framework").exists()


def test_publish_without_a_token_stops_before_any_git_or_network_step(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, ("02-",))
    done = run_cli("publish", "--repo", str(repo), env=child_env({"GITHUB_REPOSITORY": "acme/review"}))
    assert done.code == 2 and done.stdout == "", done.output
    one_error(done.stderr, "GITHUB_TOKEN", "is not set", "--no-pr")


def test_collect_of_a_missing_folder_is_a_usage_error(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, ("02-",))
    done = run_cli("collect", str(tmp_path / "nowhere"), "--repo", str(repo), env=child_env())
    assert done.code == 2 and done.stdout == "", done.output
    assert done.stderr.splitlines()[-1].startswith("Error: Invalid value for 'INCOMING'"), done.stderr
    assert "Traceback" not in done.stderr


def test_demo_refuses_a_directory_it_did_not_make(tmp_path: Path) -> None:
    precious = tmp_path / "work"
    precious.mkdir()
    (precious / "thesis.tex").write_text("years of work", encoding="utf-8")
    done = run_cli("demo", "--dir", str(precious), env=child_env())
    assert done.code == 2 and done.stdout == "", done.output
    one_error(done.stderr, "--dir", "refusing to delete", "not a previous demo")
    assert [p.name for p in precious.iterdir()] == ["thesis.tex"]
