"""Which family a report counts under (issue 23, point 4), through `research-dispatch synthesize` as a
user runs it: derived models by lineage, a configured lineage, an author no table knows, and an
unverified report counted under the family its call log says served it."""

from __future__ import annotations

import json
from pathlib import Path

from research_dispatch.config.lineage import canonical_slug
from research_dispatch.config.settings import Settings
from tests.synthesis.conftest import write_report
from tests.synthesis.test_scenarios import DATABASE, by_pick, rec, run

PYPROJECT = """[tool.research-dispatch]
framework_name = "planted"
gateway = {{backoff_base_s = 0.0, backoff_max_s = 0.0, max_retries = 1}}
synthesis = {{judge_models = ["qwen/qwen3-max", "anthropic/claude-sonnet-4.6"]{synthesis}}}
{extra}
"""


def repo_of(tmp_path: Path, models: dict[str, str], *, extra: str = "", synthesis: str = "") -> Path:
    repo = tmp_path / "lineage"
    repo.mkdir(parents=True)
    (repo / "pyproject.toml").write_text(PYPROJECT.format(extra=extra, synthesis=synthesis), encoding="utf-8")
    for stem, model in models.items():
        write_report(repo, stem, model, ["The report states its findings with a citation"])
    return repo


def test_a_derived_model_counts_as_its_parent_family(tmp_path: Path, gateway, synth_env) -> None:
    """Why: `tngtech/deepseek-r1t2-chimera` is DeepSeek merged; counted by author, it confirmed DeepSeek as
    an "independent" family."""
    repo = repo_of(tmp_path, {"01-a": "deepseek/deepseek-v4-pro", "02-b": "tngtech/deepseek-r1t2-chimera"})
    result, data, _document = run(repo, gateway, synth_env, {"01-a": [rec("Postgres", DATABASE)],
                                                              "02-b": [rec("Postgres", DATABASE)]})
    assert result.code == 0, result.stderr
    reports = {r["stem"]: r for r in data["reports"]}
    assert reports["02-b"]["family"] == "deepseek" and reports["02-b"]["families"] == ["deepseek"]
    postgres = by_pick(data)["Postgres"]
    assert postgres["status"] == "same_family" and postgres["families"] == ["deepseek"]
    assert "not in the lineage table" not in result.stdout  # tngtech's chimera is in the built-in table


def test_an_author_no_table_knows_is_named_and_a_configured_lineage_is_used(tmp_path: Path, gateway,
                                                                            synth_env) -> None:
    models = {"01-a": "deepseek/deepseek-v4-pro", "02-b": "acme-labs/merge-7b"}
    answers = {"01-a": [rec("Postgres", DATABASE)], "02-b": [rec("Postgres", DATABASE)]}
    repo = repo_of(tmp_path, models)
    result, data, _document = run(repo, gateway, synth_env, answers)
    assert result.code == 0, result.stderr
    assert by_pick(data)["Postgres"]["status"] == "convergent"  # counted as its own family acme-labs ...
    [warning] = [line for line in result.stdout.splitlines() if "lineage table" in line]
    assert warning.startswith("warning: research/02-b.md: model author 'acme-labs' is not in the lineage table")
    assert "[tool.research-dispatch] lineage" in warning  # ... and named, with what to do about it

    lineage_repo = repo_of(tmp_path / "configured", models, extra='lineage = {"acme-labs/merge-7b" = "deepseek"}')
    result, data, _document = run(lineage_repo, gateway, synth_env, answers)
    assert result.code == 0, result.stderr
    assert by_pick(data)["Postgres"]["status"] == "same_family"
    assert "lineage table" not in result.stdout


def test_a_counted_unverified_report_counts_under_the_family_its_call_log_names(tmp_path: Path, gateway,
                                                                               synth_env) -> None:
    """Why: with count_unverified, a report whose call log says deepseek served it was counted under its
    front matter's family, and shown as served by the model its front matter names."""
    repo = repo_of(tmp_path, {"01-a": "deepseek/deepseek-v4-pro"}, synthesis=", count_unverified = true")
    write_report(repo, "02-b", "openai/gpt-5", ["The report states its findings with a citation"],
                 served="openai/gpt-5")  # the front matter says gpt-5 served it, route exact ...
    log = repo / "research" / "02-b.calls.jsonl"
    record = json.loads(log.read_text(encoding="utf-8"))
    record.update(served_model="deepseek/deepseek-v3.2", verdict="model_fallback")  # ... its call log says not
    log.write_text(json.dumps(record) + "\n", encoding="utf-8")
    result, data, document = run(repo, gateway, synth_env, {"01-a": [rec("Postgres", DATABASE)],
                                                             "02-b": [rec("Postgres", DATABASE)]})
    assert result.code == 0, result.stderr
    report = {r["stem"]: r for r in data["reports"]}["02-b"]
    assert report["counted"] is True and report["route_verified"] is False
    assert report["families"] == ["deepseek"] and report["served_models"] == ["deepseek/deepseek-v3.2"]
    assert by_pick(data)["Postgres"]["status"] == "same_family"  # deepseek twice: not independent
    coverage = document.split("## Coverage and routes", 1)[1]
    row = next(line for line in coverage.splitlines() if line.startswith("| [02-b]"))
    assert "deepseek/deepseek-v3.2" in row and "| openai/gpt-5 |" in row  # served by, requested
    assert ("[02-b](<../research/02-b.md>) (deepseek), served by deepseek/deepseek-v3.2" in document)


def test_lineage_keys_compare_without_variants_or_dates() -> None:
    assert canonical_slug("TNGTech/DeepSeek-R1T2-Chimera:free") == "tngtech/deepseek-r1t2-chimera"
    assert canonical_slug("anthropic/claude-sonnet-4.6-20260101") == "anthropic/claude-sonnet-4.6"
    settings = Settings(families={"acme": "openai"}, lineage={"acme/special-1": "qwen"})
    assert settings.family_of("tngtech/deepseek-r1t2-chimera:free") == "deepseek"
    assert settings.family_of("acme/special-1") == "qwen"  # a model's lineage wins over its author's map
    assert settings.family_of("acme/other") == "openai"
    assert settings.unknown_author("acme/other") is None and settings.unknown_author("zz/y") == "zz"
