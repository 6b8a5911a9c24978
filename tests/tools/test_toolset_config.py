"""Configuration of the toolset: providers, MCP server tables and topic references, checked by `check`
(the CLI as users type it, run in process: tests/clirun.py): bad input is exit 2 and one line naming
the file and the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from research_dispatch.config.plan import plan_legs
from research_dispatch.config.settings import load_settings
from research_dispatch.config.topics import load_topics
from research_dispatch.leg.execute import leg_input_hash, leg_input_hashes
from tests.clirun import CliRun, run_cli
from tests.tools.conftest import make_repo, mcp_server_table


def check(repo: Path) -> CliRun:
    return run_cli("check", "--repo", str(repo))


def test_a_configured_toolset_checks_ok(tmp_path: Path) -> None:
    config = 'search = {providers = ["tavily", "exa"]}\n' + mcp_server_table(
        "aws-docs", ["awslabs.aws-documentation-mcp-server"], ["search_documentation", "read_documentation"],
        env={"FASTMCP_LOG_LEVEL": "ERROR"})
    repo = make_repo(tmp_path, topic_extra="mcp: [aws-docs]\nsearch: {providers: [exa], max_results: 5}\n",
                     config=config)
    done = check(repo)
    assert done.code == 0, done.stderr
    assert done.stdout.strip() == "ok: 1 topic(s), 1 leg(s)"


def test_unknown_server_in_a_topic_names_the_topic_file_and_field(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, topic_extra="mcp: [aws-docs]\n")
    done = check(repo)
    assert done.code == 2
    assert done.stderr.strip().splitlines() == [
        "error: topics/02-diloco-family.yaml: mcp[0]: unknown MCP server 'aws-docs' (configured in "
        "[tool.research-dispatch.mcp.servers]: none are configured)"]
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(("table", "field", "message"), [
    ('[tool.research-dispatch.mcp.servers.docs]\ncommand = ["x"]\n', "mcp.servers.docs.tools", "required key"),
    ('[tool.research-dispatch.mcp.servers.docs]\ncommand = ["x"]\nurl = "https://a.org/mcp"\ntools = ["t"]\n',
     "mcp.servers.docs", "exactly one of command"),
    ('[tool.research-dispatch.mcp.servers.docs]\nurl = "http://docs.example.org/mcp"\ntools = ["t"]\n',
     "mcp.servers.docs.url", "plain http is allowed only to a loopback"),
    ('[tool.research-dispatch.mcp.servers.Docs_1]\ncommand = ["x"]\ntools = ["t"]\n', "mcp.servers",
     "is not a server name"),
    ('[tool.research-dispatch.mcp.servers.docs]\ncommand = ["x"]\ntools = ["t"]\nenv = {K = "${NOT VALID}"}\n',
     "mcp.servers.docs.env", "must be exactly ${VARIABLE}"),
    ('[tool.research-dispatch.mcp.servers.docs]\ncommand = ["x"]\ntools = ["has space"]\n',
     "mcp.servers.docs.tools", "is not a tool name"),
    ('[tool.research-dispatch.mcp.servers.docs]\ncommand = []\ntools = ["t"]\n', "mcp.servers.docs.command",
     "must name the program"),
    ('[tool.research-dispatch.mcp.servers.docs]\ncommand = ["x"]\ntools = ["t"]\ntimeout_s = 0\n',
     "mcp.servers.docs.timeout_s", "greater than 0"),
    ('[tool.research-dispatch.search]\nproviders = ["bing"]\n', "search.providers[0]", "'tavily' or 'exa'"),
    ('[tool.research-dispatch.search]\nproviders = []\n', "search.providers", "at least one search provider"),
    ('[tool.research-dispatch.search]\nproviders = ["exa", "exa"]\n', "search.providers", "listed twice"),
])
def test_bad_tables_are_exit_2_naming_the_field(tmp_path: Path, table: str, field: str, message: str) -> None:
    repo = make_repo(tmp_path, config="\n" + table)
    done = check(repo)
    assert done.code == 2, done.stdout
    line = done.stderr.strip()
    assert line.startswith(f"error: pyproject.toml: tool.research-dispatch.{field}"), line
    assert message in line and "\n" not in line and "Traceback" not in line


@pytest.mark.parametrize(("extra", "field"), [("mcp: [Bad]\n", "mcp"), ("mcp: aws-docs\n", "mcp"),
                                              ("search: {providers: [google]}\n", "search.providers[0]")])
def test_bad_topic_fields_are_exit_2(tmp_path: Path, extra: str, field: str) -> None:
    done = check(make_repo(tmp_path, topic_extra=extra))
    assert done.code == 2
    assert done.stderr.startswith(f"error: topics/02-diloco-family.yaml: {field}"), done.stderr


def test_a_topic_tuning_search_keeps_the_configured_providers(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, topic_extra="search: {max_results: 5}\n", config='search = {providers = ["exa"]}\n')
    settings = load_settings(repo)
    (topic,) = load_topics(repo, settings)
    from research_dispatch.config.topics import effective

    assert effective(topic.topic, settings)[2].providers == ("exa",)


def test_the_default_toolset_leaves_input_hashes_unchanged(tmp_path: Path) -> None:
    """Tavily alone and no MCP: the hash is what it was before the toolset existed (legs are not re-run)."""
    import hashlib
    import json

    from research_dispatch.leg.researcher import PROMPT_VERSION

    repo = make_repo(tmp_path)
    settings = load_settings(repo)
    (leg,) = plan_legs(load_topics(repo, settings), settings)
    search = {"max_results": 8, "depth": "advanced", "include_domains": [], "exclude_domains": []}
    before = {"topic": leg.topic_file.content_sha256, "model": leg.route.model, "provider": None,
              "prompt": PROMPT_VERSION, "words": settings.words.model_dump(), "budget": settings.budget.model_dump(),
              "search": search}
    expected = hashlib.sha256(json.dumps(before, sort_keys=True).encode()).hexdigest()[:16]
    assert leg_input_hash(leg, settings) == expected
    legacy = hashlib.sha256(json.dumps({**before, "topic": leg.topic_file.raw_sha256},
                                       sort_keys=True).encode()).hexdigest()[:16]
    assert leg_input_hashes(leg, settings) == {expected, legacy}  # reports hashed by the file's bytes still count
    with_exa = make_repo(tmp_path / "exa", config='search = {providers = ["tavily", "exa"]}\n')
    exa_settings = load_settings(with_exa)
    (exa_leg,) = plan_legs(load_topics(with_exa, exa_settings), exa_settings)
    assert leg_input_hash(exa_leg, exa_settings) != expected
