"""`check` knows what cannot work, offline (issue 30.2): each trap a new user met, as `check` now answers it.

* a judge that cannot judge: every report family needs a judge of another family (exit 2 naming
  `synthesis.judge_models`); a topic whose models are all one family is a warning naming the topic;
* a model typo (`openai/gpt5`): a warning with the price list's did-you-mean (not an error: a model newer
  than the bundled list is not listed yet);
* a misspelt table (`[tool.research_dispatch.pr]`): exit 2 naming it with the table that is read, in every
  command; a merely close name is a warning;
* a config error no longer hides the topic errors;
* YAML errors carry line and column, and a line that lost its indentation under `scope: |` is named so;
* an empty directory says to run `research-dispatch init`;
* `check --json` problems are `{file, field, message}`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.clirun import CliRun, run_cli
from tests.profiles import examples

TWO_FAMILIES = """id: rag
title: Evaluating RAG
scope: |
  Survey how retrieval-augmented generation is evaluated.
  Recommend what a small team should adopt first.
models:
  - model: openai/gpt-5
  - model: anthropic/claude-sonnet-4.6
"""
THIRD_FAMILY_JUDGE = '[tool.research-dispatch.synthesis]\njudge_models = ["google/gemini-3.1-pro-preview"]\n'


def repo_with(tmp_path: Path, topics: dict[str, str], pyproject: str | None = THIRD_FAMILY_JUDGE) -> Path:
    repo = tmp_path / "review"
    (repo / "topics").mkdir(parents=True)
    for name, text in topics.items():
        (repo / "topics" / name).write_text(text, encoding="utf-8")
    if pyproject is not None:
        (repo / "pyproject.toml").write_text(pyproject, encoding="utf-8")
    return repo


def check(repo: Path, *args: str) -> CliRun:
    return run_cli("check", "--repo", str(repo), *args)


def lines(result: CliRun, kind: str) -> list[str]:
    return [line.removeprefix(f"{kind}: ") for line in result.stderr.splitlines() if line.startswith(f"{kind}: ")]


def test_a_judge_of_the_reports_own_family_is_exit_2_naming_judge_models(tmp_path: Path) -> None:
    """Topics by openai and anthropic with judge_models = ["openai/gpt-5-mini"]: the openai reports have no
    judge of another family, so their citations would never be checked and a two-family convergence would
    show as single-source, after the legs were paid."""
    repo = repo_with(tmp_path, {"01-rag.yaml": TWO_FAMILIES},
                     '[tool.research-dispatch.synthesis]\njudge_models = ["openai/gpt-5-mini"]\n')
    result = check(repo)
    assert result.code == 2, result.output
    assert lines(result, "error") == [
        "pyproject.toml: tool.research-dispatch.synthesis.judge_models: no judge can check the reports of the openai "
        "family (topics/01-rag.yaml): every judge (openai/gpt-5-mini) is of that family, and a judge must be of "
        "another; add a judge of another family"]
    assert "ok:" not in result.stdout


def test_citation_judges_of_the_reports_family_are_named_too(tmp_path: Path) -> None:
    repo = repo_with(tmp_path, {"01-rag.yaml": TWO_FAMILIES}, THIRD_FAMILY_JUDGE
                     + 'citation_models = ["anthropic/claude-haiku-4.5"]\n')
    result = check(repo)
    assert result.code == 2
    (error,) = lines(result, "error")
    assert error.startswith("pyproject.toml: tool.research-dispatch.synthesis.citation_models: no judge can check "
                            "the reports of the anthropic family")


def test_a_topic_whose_models_are_one_family_is_a_warning_naming_it(tmp_path: Path) -> None:
    one_family = TWO_FAMILIES.replace("anthropic/claude-sonnet-4.6", "openai/gpt-5-mini").replace("id: rag", "id: solo")
    repo = repo_with(tmp_path, {"01-rag.yaml": TWO_FAMILIES, "02-solo.yaml": one_family})
    result = check(repo)
    assert result.code == 0, result.output
    assert lines(result, "warning") == [
        "topics/02-solo.yaml: models: all 2 models of topic 'solo' are of the openai family, so its reports cannot "
        "confirm each other (convergence needs two families); route one to another family"]
    assert result.stdout.strip() == "ok: 2 topic(s), 4 leg(s), 1 warning(s)"


def test_a_model_typo_gets_the_price_lists_did_you_mean_as_a_warning(tmp_path: Path) -> None:
    repo = repo_with(tmp_path, {"01-rag.yaml": TWO_FAMILIES.replace("openai/gpt-5\n", "openai/gpt5\n")})
    result = check(repo)
    assert result.code == 0, result.output  # a model newer than the bundled list is not listed yet
    (warning,) = lines(result, "warning")
    assert warning.startswith("topics/01-rag.yaml: models[0].model: openai/gpt5 is not in the bundled price list "
                              "(genai-prices ")
    assert "did you mean openai/gpt-5 or " in warning and "`check --online` asks the gateway" in warning


def test_a_misspelt_table_of_ours_is_exit_2_in_every_command_naming_the_table_read(tmp_path: Path) -> None:
    """`[tool.research_dispatch.pr]` was silently ignored: the refresh PR went to the wrong base and the later
    error did not name the table."""
    repo = repo_with(tmp_path, {"01-rag.yaml": TWO_FAMILIES},
                     THIRD_FAMILY_JUDGE + '[tool.research_dispatch.pr]\nbase = "develop"\n')
    expected = ("pyproject.toml: tool.research_dispatch.pr: is not read: research-dispatch reads "
                "[tool.research-dispatch.pr] (with a hyphen); rename the table")
    result = check(repo)
    assert result.code == 2 and lines(result, "error") == [expected]
    plan = run_cli("plan", "--repo", str(repo), "--json")
    assert plan.code == 2 and plan.stderr.strip() == f"error: {expected}"


def test_a_table_name_close_to_ours_is_a_did_you_mean_warning(tmp_path: Path) -> None:
    repo = repo_with(tmp_path, {"01-rag.yaml": TWO_FAMILIES},
                     THIRD_FAMILY_JUDGE + '[tool.research-dispatcher]\nbase = "x"\n[tool.ruff]\nline-length = 9\n')
    result = check(repo)
    assert result.code == 0, result.output
    assert lines(result, "warning") == ["pyproject.toml: tool.research-dispatcher: is not read by research-dispatch; "
                                        "did you mean [tool.research-dispatch]?"]


def test_a_config_error_no_longer_hides_the_topic_errors(tmp_path: Path) -> None:
    repo = repo_with(tmp_path, {"01-rag.yaml": TWO_FAMILIES, "02-bad.yaml": "id: bad\ntitle: Bad\n"},
                     '[tool.research-dispatch]\njobs = "four"\ntopics_dir = "topics"\n')
    result = check(repo)
    assert result.code == 2
    assert lines(result, "error") == [
        "pyproject.toml: tool.research-dispatch.jobs: expected a number, got str 'four'",
        "topics/02-bad.yaml: scope: required key is missing",
        "topics/02-bad.yaml: models: required key is missing"]


def test_an_unindented_line_in_scope_is_named_with_its_line_and_column(tmp_path: Path) -> None:
    """Both forms of the mistake: a line that reads as a key of its own ("…: unknown key" without a line
    before), and one that breaks the parse."""
    as_key = TWO_FAMILIES.replace("  Recommend what", "Note: recommend what")
    as_text = TWO_FAMILIES.replace("  Recommend what", "Recommend what").replace("id: rag", "id: rag2")
    repo = repo_with(tmp_path, {"01-rag.yaml": as_key, "02-rag2.yaml": as_text})
    result = check(repo)
    assert result.code == 2
    assert lines(result, "error") == [
        "topics/01-rag.yaml: Note: unknown key (line 5, column 1); is line 5 part of the `scope: |` text above it? "
        "Indent it like the lines before it",
        "topics/02-rag2.yaml: could not find expected ':' (line 6, column 1), while scanning a simple key (line 5, "
        "column 1); is line 5 part of the `scope: |` text above it? Indent it like the lines before it"]


def test_an_empty_directory_says_to_run_init(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = run_cli("check")
    assert result.code == 2
    assert result.stderr.strip() == ("error: topics/: there is no topics/ folder here: run `research-dispatch init` "
                                     "to set this repository up (the configuration, an example topic, the workflows)")


def test_check_json_problems_and_warnings_are_file_field_message_objects(tmp_path: Path) -> None:
    repo = repo_with(tmp_path, {"01-rag.yaml": TWO_FAMILIES.replace("openai/gpt-5\n", "openai/gpt5\n"),
                                "02-bad.yaml": "id: bad\ntitle: [1]\n"})
    result = check(repo, "--json")
    assert result.code == 2
    document = json.loads(result.stdout)
    assert document["schema"] == "research-dispatch/check@2" and document["ok"] is False
    assert {"file": "topics/02-bad.yaml", "field": "title",
            "message": "Input should be a valid string (line 2, column 1)"} in document["problems"]
    assert document["warnings"][0]["file"] == "topics/01-rag.yaml"
    assert document["warnings"][0]["field"] == "models[0].model"
    assert all(set(p) == {"file", "field", "message"} for p in document["problems"] + document["warnings"])
    assert document["checked"] == [] and document["online"] is False


KEYS = st.from_regex(r"[a-z][a-z_]{2,12}", fullmatch=True).filter(
    lambda k: k not in {"id", "title", "scope", "models", "words", "budget", "search", "mcp"})


@given(KEYS, st.integers(min_value=0, max_value=3))
@settings(max_examples=examples(25), deadline=None)
def test_an_unknown_key_is_said_at_the_line_it_is_on(tmp_path_factory: pytest.TempPathFactory, key: str,
                                                     after: int) -> None:
    """Wherever a stray key sits among the top-level keys, the problem names its line and column 1."""
    blocks = ["id: rag\n", "title: Evaluating RAG\n", "scope: Survey RAG evaluation.\n",
              "models:\n  - model: openai/gpt-5\n  - model: anthropic/claude-sonnet-4.6\n"]
    position = min(after + 1, len(blocks))
    text = "".join(blocks[:position]) + f"{key}: 1\n" + "".join(blocks[position:])
    line = text.splitlines().index(f"{key}: 1") + 1
    root = tmp_path_factory.mktemp("stray")
    result = check(repo_with(root, {"01-rag.yaml": text}))
    assert result.code == 2
    (error,) = lines(result, "error")
    assert error.startswith(f"topics/01-rag.yaml: {key}: unknown key (line {line}, column 1)"), error
