"""Configuration and topic files: defaults, computed paths, and the bad-input corpus.

Every bad topic file must exit 2 with exactly one line that names the file — no traceback, fast.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from research_dispatch.config.plan import plan_legs
from research_dispatch.config.settings import Settings, load_settings
from research_dispatch.config.topics import load_topics
from tests.clirun import run_cli
from tests.conftest import ROOT, write_topic

GOOD = """\
id: tiny
title: Tiny topic
scope: Find things.
models:
  - model: openai/gpt-5
"""

BILLION_LAUGHS = "a: &a ['x','x','x','x','x','x','x','x','x']\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)},"
    f"*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)}]\n" for i in range(9))

BAD_TOPICS: dict[str, tuple[str, str | bytes, str]] = {
    # case: (file name, content, a fragment the one-line message must contain)
    "traversal-id": ("01-x.yaml", GOOD.replace("id: tiny", "id: ../../etc/passwd"), "id"),
    "slash-in-id": ("01-x.yaml", GOOD.replace("id: tiny", "id: a/b"), "id"),
    "absolute-id": ("01-x.yaml", GOOD.replace("id: tiny", "id: /etc"), "id"),
    "dotdot-id": ("01-a..b.yaml", GOOD.replace("id: tiny", "id: a..b"), "id"),
    "bad-file-name": ("topic.yaml", GOOD, "file name"),
    "id-mismatch": ("01-other.yaml", GOOD, "does not match the file name"),
    "alias-bomb": ("01-tiny.yaml", BILLION_LAUGHS + GOOD, "not allowed"),
    "anchor-reuse": ("01-tiny.yaml", GOOD + "search: &s {max_results: 3}\nextra: *s\n", "not allowed"),
    "duplicate-key": ("01-tiny.yaml", GOOD + "title: Again\n", "duplicate key"),
    "unknown-key": ("01-tiny.yaml", GOOD + "modle: typo\n", "modle: unknown key"),
    "unknown-nested-key": ("01-tiny.yaml", GOOD + "budget: {max_step: 3}\n", "budget.max_step"),
    "invalid-utf8": ("01-tiny.yaml", GOOD.encode() + b"# \xff\xfe broken\n", "UTF-8"),
    "empty": ("01-tiny.yaml", "", "empty"),
    "whitespace-only": ("01-tiny.yaml", "   \n\n", "empty"),
    "nul-bytes": ("01-tiny.yaml", GOOD + "\x00\n", "NUL"),
    "not-a-mapping": ("01-tiny.yaml", "- a\n- b\n", "mapping"),
    "two-documents": ("01-tiny.yaml", GOOD + "---\n" + GOOD, "one YAML document"),
    "syntax-error": ("01-tiny.yaml", "id: [unclosed\n", "line"),
    "python-tag": ("01-tiny.yaml", GOOD + "x: !!python/object/apply:os.system ['true']\n", "01-tiny.yaml"),
    "missing-title": ("01-tiny.yaml", GOOD.replace("title: Tiny topic\n", ""), "title"),
    "models-wrong-type": ("01-tiny.yaml", GOOD.split("models:")[0] + "models: openai/gpt-5\n", "models"),
    "models-empty": ("01-tiny.yaml", GOOD.split("models:")[0] + "models: []\n", "models"),
    "slug-without-author": ("01-tiny.yaml", GOOD.replace("openai/gpt-5", "gpt-5"), "models[0].model"),
    "slug-router": ("01-tiny.yaml", GOOD.replace("openai/gpt-5", "openrouter/auto"), "router"),
    "slug-alias": ("01-tiny.yaml", GOOD.replace("openai/gpt-5", "~openai/gpt-latest"), "models[0].model"),
    "slug-variant": ("01-tiny.yaml", GOOD.replace("openai/gpt-5", "openai/gpt-5:nitro"), "variant"),
    "slug-traversal": ("01-tiny.yaml", GOOD.replace("openai/gpt-5", "../../x"), "models[0].model"),
    "duplicate-model": ("01-tiny.yaml", GOOD + "  - model: openai/gpt-5\n", "listed twice"),
    "bad-provider": ("01-tiny.yaml", GOOD + "    provider: 'Deep Seek!'\n", "provider"),
    "band-inverted": ("01-tiny.yaml", GOOD + "words: {min: 3000, max: 2000}\n", "words"),
    "absurd-steps": ("01-tiny.yaml", GOOD + "budget: {max_steps: 100000}\n", "budget.max_steps"),
    "negative-cost": ("01-tiny.yaml", GOOD + "budget: {max_cost_usd: -1}\n", "budget.max_cost_usd"),
    "absurd-timeout": ("01-tiny.yaml", GOOD + "budget: {timeout_minutes: 99999}\n", "budget.timeout_minutes"),
    "string-steps": ("01-tiny.yaml", GOOD + "budget: {max_steps: many}\n", "budget.max_steps"),
    "bad-depth": ("01-tiny.yaml", GOOD + "search: {depth: deepest}\n", "search.depth"),
    "bad-domain": ("01-tiny.yaml", GOOD + "search: {include_domains: ['a b']}\n", "include_domains"),
    "multiline-title": ("01-tiny.yaml", GOOD.replace("title: Tiny topic", 'title: "a\\nb"'), "title"),
    "deep-nesting": ("01-tiny.yaml", GOOD + "x: " + "[" * 40 + "]" * 40 + "\n", "nesting"),
    "huge-file": ("01-tiny.yaml", GOOD + "# " + "x" * 70_000 + "\n", "limit"),
    "non-string-key": ("01-tiny.yaml", GOOD + "1: one\n", "keys must be strings"),
}


@pytest.mark.parametrize("case", sorted(BAD_TOPICS))
def test_bad_topic_file_exits_2_with_one_line_naming_the_file(repo: Path, case: str) -> None:
    name, content, fragment = BAD_TOPICS[case]
    write_topic(repo, name, content)
    result = run_cli("check", "--repo", str(repo))
    assert result.code == 2, result.output
    lines = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1, lines
    assert f"topics/{name}" in lines[0]
    assert fragment in lines[0]
    assert "Traceback" not in result.output


def test_duplicate_topic_ids_across_files(repo: Path) -> None:
    write_topic(repo, "10-tiny.yaml", GOOD)
    write_topic(repo, "11-tiny.yaml", GOOD)
    result = run_cli("check", "--repo", str(repo))
    assert result.code == 2
    assert "topics/11-tiny.yaml: id: duplicate topic id 'tiny' (also in topics/10-tiny.yaml)" in result.stderr


def test_several_bad_files_give_one_line_each(repo: Path) -> None:
    write_topic(repo, "10-a.yaml", "")
    write_topic(repo, "11-b.yaml", GOOD.replace("id: tiny", "id: b") + "zzz: 1\n")
    result = run_cli("check", "--repo", str(repo))
    assert result.code == 2
    assert [line.split(":")[1].strip() for line in result.stderr.splitlines()
            if line.startswith("error: ")] == ["topics/10-a.yaml", "topics/11-b.yaml"]


@pytest.mark.slow
def test_bad_input_through_the_real_console_script(repo: Path) -> None:
    """The installed entry point, as CI and users call it: exit 2, one line, no traceback."""
    write_topic(repo, "01-tiny.yaml", BILLION_LAUGHS + GOOD)
    proc = subprocess.run([sys.executable, "-m", "research_dispatch", "check", "--repo", str(repo)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "topics/01-tiny.yaml" in errors[0]
    assert "Traceback" not in proc.stderr


def test_bad_pyproject_setting_names_file_and_field(repo: Path) -> None:
    (repo / "pyproject.toml").write_text("[tool.research-dispatch]\nwords = {min = 10, max = 5}\n")
    result = run_cli("check", "--repo", str(repo))
    assert result.code == 2
    assert result.stderr.startswith("error: pyproject.toml: tool.research-dispatch.words")


def test_unknown_pyproject_key_is_rejected(repo: Path) -> None:
    (repo / "pyproject.toml").write_text("[tool.research-dispatch]\nframwork_name = 'x'\n")
    result = run_cli("check", "--repo", str(repo))
    assert result.code == 2
    assert "tool.research-dispatch.framwork_name: unknown key" in result.stderr


@pytest.mark.parametrize("value", ["'/etc'", "'../out'"])
def test_paths_in_config_must_stay_inside_the_repository(repo: Path, value: str) -> None:
    (repo / "pyproject.toml").write_text(f"[tool.research-dispatch]\nresearch_dir = {value}\n")
    result = run_cli("check", "--repo", str(repo))
    assert result.code == 2 and "research_dir" in result.stderr


def test_a_repository_with_only_topics_works(single_topic_repo: Path) -> None:
    settings = load_settings(single_topic_repo)
    assert settings == Settings()
    topics = load_topics(single_topic_repo, settings)
    assert [t.stem for t in topics] == ["02-diloco-family"]


def test_report_paths_are_computed(repo: Path) -> None:
    write_topic(repo, "06-multi.yaml", GOOD.replace("id: tiny", "id: multi")
                + "  - model: anthropic/claude-sonnet-4.6\n    provider: anthropic\n")
    settings = load_settings(repo)
    legs = plan_legs(load_topics(repo, settings), settings)
    stems = [leg.stem for leg in legs]
    assert stems[:2] == ["01-composer-2.5", "02-diloco-family"]
    assert "06-multi.openai-gpt-5" in stems and "06-multi.anthropic-claude-sonnet-4.6" in stems
    multi = next(leg for leg in legs if leg.stem == "06-multi.anthropic-claude-sonnet-4.6")
    assert multi.report_relpath(settings) == "research/06-multi.anthropic-claude-sonnet-4.6.md"
    assert multi.family == "anthropic"


def test_family_mapping_from_config(repo: Path) -> None:
    (repo / "pyproject.toml").write_text('[tool.research-dispatch]\nfamilies = {moonshotai = "kimi"}\n')
    settings = load_settings(repo)
    assert settings.family_of("moonshotai/kimi-k2-thinking") == "kimi"
    assert settings.family_of("openai/gpt-5") == "openai"


def test_the_repository_itself_checks_clean() -> None:
    result = run_cli("check", "--repo", str(ROOT))
    assert result.code == 0, result.output
    # its own alignment judge, x-ai/grok-4, is not in the bundled price list by that name, but it is the base
    # name of listed models (x-ai/grok-4.5, x-ai/grok-4-fast): no did-you-mean to a different model
    assert result.output.strip() == "ok: 5 topic(s), 5 leg(s)"
