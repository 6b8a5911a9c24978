"""The workflow files' security and shape rules, as assertions on the parsed YAML (and on the raw text
where YAML drops information: the `# vX.Y.Z` comments next to pinned actions).

The rules: docs/WORKFLOWS.md and DESIGN.md "Workflow shape". Each test names one rule.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from research_dispatch.cli import main
from tests.conftest import ROOT
from tests.workflows.expressions import parse, split_template
from tests.workflows.runner_harness import load_workflow

WORKFLOWS = ROOT / ".github" / "workflows"
MAIN = "research-refresh.yml"
SCHEDULE = "research-refresh-schedule.yml"
CI = "ci.yml"
FILES = [MAIN, SCHEDULE, CI]
INPUTS = {"topics", "models", "max-parallel", "dry-run", "cycle"}


def wf(name: str) -> dict[str, Any]:
    return load_workflow(WORKFLOWS / name)


def jobs(name: str) -> dict[str, dict[str, Any]]:
    return wf(name)["jobs"]


def steps(name: str) -> Iterator[tuple[str, dict[str, Any]]]:
    for job_id, job in jobs(name).items():
        for step in job.get("steps") or []:
            yield job_id, step


def walk(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    yield path, value
    if isinstance(value, dict):
        for key, item in value.items():
            yield from walk(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from walk(item, (*path, index))


def strings(name: str) -> Iterator[tuple[tuple[Any, ...], str]]:
    for path, value in walk(wf(name)):
        if isinstance(value, str):
            yield path, value


def step_label(job_id: str, step: dict[str, Any]) -> str:
    return f"{job_id}: {step.get('name') or step.get('id') or step.get('uses') or step.get('run')}"


def test_the_three_workflows_and_dependabot_exist() -> None:
    assert sorted(p.name for p in WORKFLOWS.glob("*.yml")) == sorted(FILES)
    assert (ROOT / ".github" / "dependabot.yml").is_file()


@pytest.mark.parametrize("name", FILES)
def test_top_level_permissions_are_empty(name: str) -> None:
    assert wf(name)["permissions"] == {}


@pytest.mark.parametrize("name", FILES)
def test_every_job_has_explicit_permissions_and_a_timeout(name: str) -> None:
    for job_id, job in jobs(name).items():
        assert isinstance(job.get("permissions"), dict) and job["permissions"], f"{name}:{job_id} permissions"
        if "uses" in job:  # a reusable-workflow call: GitHub allows no timeout-minutes there
            assert "timeout-minutes" not in job and "steps" not in job
        else:
            assert isinstance(job.get("timeout-minutes"), int) and 0 < job["timeout-minutes"] <= 60, job_id


def test_only_publish_and_the_schedule_caller_can_write() -> None:
    grants = {(name, job_id): job["permissions"] for name in FILES for job_id, job in jobs(name).items()}
    writers = {key for key, perms in grants.items() if "write" in perms.values()}
    assert writers == {(MAIN, "publish"), (SCHEDULE, "refresh")}
    assert grants[(MAIN, "publish")] == {"contents": "write", "pull-requests": "write"}
    for key, perms in grants.items():
        if key not in writers:
            assert perms == {"contents": "read"}, key


def test_the_schedule_caller_grants_exactly_what_the_called_jobs_need() -> None:
    level = {"none": 0, "read": 1, "write": 2}
    needed: dict[str, str] = {}
    for job in jobs(MAIN).values():
        for scope, value in job["permissions"].items():
            if level[value] > level[needed.get(scope, "none")]:
                needed[scope] = value
    assert jobs(SCHEDULE)["refresh"]["permissions"] == needed


@pytest.mark.parametrize("name", FILES)
def test_remote_actions_are_pinned_to_a_commit_with_a_version_comment(name: str) -> None:
    pins: dict[str, set[str]] = {}
    lines = (WORKFLOWS / name).read_text(encoding="utf-8").splitlines()
    uses_lines = [line for line in lines if re.match(r"^\s*(-\s+)?uses:", line)]
    assert uses_lines
    for line in uses_lines:
        ref = line.split("uses:", 1)[1].split("#", 1)[0].strip()
        if ref.startswith("./"):
            continue
        match = re.fullmatch(r"\s*(-\s+)?uses: ([\w.-]+/[\w.-]+)@([0-9a-f]{40}) # v\d+\.\d+\.\d+", line)
        assert match, f"{name}: not pinned to a full commit sha with a # vX.Y.Z comment: {line.strip()}"
        pins.setdefault(match.group(2), set()).add(line.split("@", 1)[1])
    for action, versions in pins.items():
        assert len(versions) == 1, f"{name}: {action} pinned to several commits: {versions}"


def test_every_checkout_drops_its_credentials() -> None:
    checkouts = [(name, job_id, step) for name in FILES for job_id, step in steps(name)
                 if str(step.get("uses", "")).startswith("actions/checkout@")]
    assert len(checkouts) >= 6
    for name, job_id, step in checkouts:
        assert (step.get("with") or {}).get("persist-credentials") is False, f"{name}:{job_id}"


@pytest.mark.parametrize("name", FILES)
def test_no_expression_inside_any_run_script(name: str) -> None:
    for job_id, step in steps(name):
        if "run" in step:
            assert "${{" not in step["run"], step_label(job_id, step)


def test_secrets_appear_only_where_they_are_needed() -> None:
    """Every mention of `secrets.` in any file, exactly: the keys reach only the steps that use them."""
    found = set()
    for name in FILES:
        for path, text in strings(name):
            for _, expr in (part for part in split_template(text) if part[0]):
                for secret in re.findall(r"secrets\.([A-Za-z_][A-Za-z0-9_]*)", expr):
                    found.add((name, *path[:-1], path[-1], secret))
    research_step = next(i for i, s in enumerate(jobs(MAIN)["research"]["steps"]) if s.get("name") == "Research")
    synth_step = next(i for i, s in enumerate(jobs(MAIN)["synthesize"]["steps"]) if s.get("name") == "Synthesize")
    publish_steps = jobs(MAIN)["publish"]["steps"]
    token_step = next(i for i, s in enumerate(publish_steps) if s.get("id") == "app-token")
    write_step = next(i for i, s in enumerate(publish_steps) if "research-dispatch publish" in s.get("run", ""))
    assert found == {
        (MAIN, "jobs", "research", "steps", research_step, "env", "OPENROUTER_API_KEY", "OPENROUTER_API_KEY"),
        (MAIN, "jobs", "research", "steps", research_step, "env", "TAVILY_API_KEY", "TAVILY_API_KEY"),
        (MAIN, "jobs", "synthesize", "steps", synth_step, "env", "OPENROUTER_API_KEY", "OPENROUTER_API_KEY"),
        # the App's private key goes only to the action that mints the short-lived token
        (MAIN, "jobs", "publish", "steps", token_step, "with", "private-key", "REFRESH_APP_PRIVATE_KEY"),
        (MAIN, "jobs", "publish", "steps", write_step, "env", "GITHUB_TOKEN", "GITHUB_TOKEN"),
        # the schedule wrapper passes each secret explicitly (no `secrets: inherit`)
        (SCHEDULE, "jobs", "refresh", "secrets", "OPENROUTER_API_KEY", "OPENROUTER_API_KEY"),
        (SCHEDULE, "jobs", "refresh", "secrets", "TAVILY_API_KEY", "TAVILY_API_KEY"),
        (SCHEDULE, "jobs", "refresh", "secrets", "REFRESH_APP_PRIVATE_KEY", "REFRESH_APP_PRIVATE_KEY"),
    }
    for name in FILES:
        assert "inherit" not in (WORKFLOWS / name).read_text(encoding="utf-8")


def test_expressions_read_only_trusted_values() -> None:
    """No model text in any expression: the only step or job outputs read are plan's (from topics/), the
    App token and leg results; everything else is an input, a matrix value, a variable, a secret or
    github.*."""
    allowed = re.compile(r"""^(
        inputs\.(topics|models|max-parallel|dry-run|cycle)
      | matrix\.(leg|topic|model|python)
      | needs\.plan\.outputs\.(matrix|count|cycle)
      | needs\.(plan|research|synthesize)\.result
      | steps\.plan\.outputs\.(matrix|count|cycle)
      | steps\.app-token\.outputs\.token
      | secrets\.[A-Z_]+
      | vars\.REFRESH_APP_CLIENT_ID
      | github\.(event\.pull_request\.number|ref)
    )$""", re.VERBOSE)
    for name in FILES:
        for path, text in strings(name):
            for is_expr, expr in split_template(text):
                if not is_expr:
                    continue
                parse(expr)  # well-formed, and only the supported subset
                for ref in re.findall(r"\b(?:inputs|matrix|needs|steps|secrets|vars|github|env)(?:\.[\w-]+)+", expr):
                    assert allowed.match(ref), f"{name} {'/'.join(map(str, path))}: {ref}"


def test_only_plan_has_job_outputs() -> None:
    for name in FILES:
        for job_id, job in jobs(name).items():
            assert ("outputs" in job) == (name == MAIN and job_id == "plan"), f"{name}:{job_id}"


def test_dispatch_and_call_take_the_same_inputs() -> None:
    on = wf(MAIN)["on"]
    assert set(on) == {"workflow_dispatch", "workflow_call"}
    dispatch, call = on["workflow_dispatch"]["inputs"], on["workflow_call"]["inputs"]
    assert set(dispatch) == set(call) == INPUTS
    assert dispatch["dry-run"]["type"] == call["dry-run"]["type"] == "boolean"
    assert dispatch["dry-run"]["default"] is False and call["dry-run"]["default"] is False
    assert dispatch["max-parallel"]["default"] == call["max-parallel"]["default"] == "4"
    assert "4" in dispatch["max-parallel"]["options"]
    for key in ("topics", "models", "cycle"):
        assert dispatch[key]["default"] == call[key]["default"] == ""
    secrets = on["workflow_call"]["secrets"]
    assert {k for k, v in secrets.items() if v["required"]} == {"OPENROUTER_API_KEY", "TAVILY_API_KEY"}
    assert set(secrets) == {"OPENROUTER_API_KEY", "TAVILY_API_KEY", "REFRESH_APP_PRIVATE_KEY"}


def test_every_input_use_is_defaulted_or_empty_means_all() -> None:
    """`inputs.*` is empty when no input was given: numbers are defaulted in the expression, the rest mean
    'all' or 'current cycle' when empty (the CLI's own defaults)."""
    text = (WORKFLOWS / MAIN).read_text(encoding="utf-8")
    assert "fromJSON(inputs.max-parallel || '4')" in text
    assert "inputs.cycle || 'current-cycle'" in text
    for ref in set(re.findall(r"inputs\.([\w-]+)", text)):
        assert ref in INPUTS


def test_research_matrix_shape() -> None:
    research = jobs(MAIN)["research"]
    strategy = research["strategy"]
    assert strategy["fail-fast"] is False
    assert strategy["max-parallel"] == "${{ fromJSON(inputs.max-parallel || '4') }}"
    assert strategy["matrix"] == "${{ fromJSON(needs.plan.outputs.matrix) }}"
    assert research["needs"] == "plan"
    assert research["if"] == "${{ needs.plan.outputs.count != '0' }}"
    assert research["timeout-minutes"] >= 30


def test_each_leg_uploads_its_artifact_even_when_it_fails() -> None:
    (upload,) = [s for s in jobs(MAIN)["research"]["steps"]
                 if str(s.get("uses", "")).startswith("actions/upload-artifact@")]
    assert upload["if"] == "${{ !cancelled() }}"
    assert upload["with"]["name"] == "leg-${{ matrix.leg }}"
    research = next(s for s in jobs(MAIN)["research"]["steps"] if s.get("name") == "Research")
    assert f"--export {upload['with']['path'].rstrip('/')}" in research["run"]


def test_synthesize_runs_when_legs_failed_and_downloads_every_leg() -> None:
    synth = jobs(MAIN)["synthesize"]
    assert "!cancelled()" in synth["if"] and "needs.plan.result == 'success'" in synth["if"]
    assert set(synth["needs"]) == {"plan", "research"}
    download = next(s for s in synth["steps"] if str(s.get("uses", "")).startswith("actions/download-artifact@"))
    assert download["with"]["pattern"] == "leg-*" and download["with"]["merge-multiple"] is True
    runs = [s["run"] for s in synth["steps"] if "run" in s]
    assert any(r.startswith("research-dispatch verify") and "--github-summary" in r for r in runs)
    assert any(r.startswith("research-dispatch synthesize") and "--github-summary" in r for r in runs)
    assert any(r.startswith("research-dispatch publish --dry-run") and "--github-summary" in r for r in runs)


def test_publish_is_the_writer_and_is_skipped_on_dry_run() -> None:
    publish = jobs(MAIN)["publish"]
    assert "!inputs.dry-run" in publish["if"] and "!cancelled()" in publish["if"]
    assert "needs.synthesize.result == 'success'" in publish["if"]
    token = next(s for s in publish["steps"] if s.get("id") == "app-token")
    assert token["uses"].startswith("actions/create-github-app-token@")
    assert token["if"] == "${{ vars.REFRESH_APP_CLIENT_ID != '' }}"
    assert token["with"]["permission-contents"] == "write" and token["with"]["permission-pull-requests"] == "write"
    assert "owner" not in token["with"]  # would grant every repository of the owner
    write = next(s for s in publish["steps"] if "research-dispatch publish" in s.get("run", ""))
    assert write["env"]["GITHUB_TOKEN"] == "${{ steps.app-token.outputs.token || secrets.GITHUB_TOKEN }}"
    assert "--dry-run" not in write["run"]
    collect = next(s for s in publish["steps"] if "research-dispatch collect" in s.get("run", ""))
    assert "--synthesis" in collect["run"]


def test_concurrency_is_one_refresh_per_cycle_never_cancelled() -> None:
    concurrency = wf(MAIN)["concurrency"]
    assert "inputs.cycle" in concurrency["group"]
    assert concurrency["cancel-in-progress"] is False


def test_pip_cache_is_keyed_on_the_lock_file_and_absent_where_we_write() -> None:
    assert (ROOT / "requirements.lock").is_file()
    for job_id, step in steps(MAIN):
        if str(step.get("uses", "")).startswith("actions/setup-python@"):
            with_ = step.get("with") or {}
            if job_id == "publish":  # cache poisoning: the job holding write access restores no cache
                assert "cache" not in with_ and "cache-dependency-path" not in with_
            else:
                assert with_.get("cache") == "pip" and with_.get("cache-dependency-path") == "requirements.lock"


def test_every_run_is_one_research_dispatch_command_or_the_install() -> None:
    install = "python -m pip install --require-hashes -r requirements.lock\npython -m pip install --no-deps .\n"
    for job_id, step in steps(MAIN):
        if "run" not in step:
            continue
        if step["run"] == install:
            continue
        lines = step["run"].strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("research-dispatch "), step_label(job_id, step)
    assert sum(1 for _, s in steps(MAIN) if s.get("run") == install) == len(jobs(MAIN))


def test_every_command_uses_only_options_the_cli_has() -> None:
    """A static twin of the end-to-end test: each `--flag` exists on its subcommand."""
    for job_id, step in steps(MAIN):
        if not step.get("run", "").startswith("research-dispatch "):
            continue
        words = shlex.split(step["run"])
        command = main.commands[words[1]]
        known = {opt for param in command.params for opt in (*param.opts, *param.secondary_opts)}
        for word in words[2:]:
            if word.startswith("--"):
                assert word in known, f"{step_label(job_id, step)}: {word} is not an option of {words[1]}"
        # every variable the command reads is mapped in the step's env
        for variable in re.findall(r"\$\{(\w+)\}", step["run"]):
            assert variable in (step.get("env") or {}), f"{step_label(job_id, step)}: ${{{variable}}} is not in env"


def test_schedule_wrapper_only_schedules_and_calls_the_main_workflow() -> None:
    schedule = wf(SCHEDULE)
    assert schedule["on"] == {"schedule": [{"cron": "17 6 1 1,7 *"}]}
    (job,) = schedule["jobs"].values()
    assert job["uses"] == f"./.github/workflows/{MAIN}"
    assert set(job["with"]) <= INPUTS
    assert set(job["secrets"]) == {"OPENROUTER_API_KEY", "TAVILY_API_KEY", "REFRESH_APP_PRIVATE_KEY"}
    assert "schedule" not in wf(MAIN)["on"]  # the main workflow can never be disabled for inactivity


def test_ci_runs_the_suite_and_the_workflow_linters() -> None:
    ci = wf(CI)
    assert {"push", "pull_request"} <= set(ci["on"])
    runs = [step["run"] for _, step in steps(CI) if "run" in step]
    assert "make test" in runs
    assert any(r.startswith("zizmor ") and "--offline" in r and "--min-severity medium" in r for r in runs)
    assert any(r.startswith("check-jsonschema --builtin-schema vendor.github-workflows") for r in runs)
    assert any(r.startswith("check-jsonschema --builtin-schema vendor.dependabot") for r in runs)
    assert any(r.startswith("actionlint") for r in runs)


def test_workflow_docs_exist_and_are_linked() -> None:
    docs = (ROOT / "docs" / "WORKFLOWS.md").read_text(encoding="utf-8")
    for needle in ("OPENROUTER_API_KEY", "TAVILY_API_KEY", "REFRESH_APP_CLIENT_ID", "REFRESH_APP_PRIVATE_KEY",
                   "Allow GitHub Actions to create and approve pull requests", "60 days", "gh workflow run",
                   "collect"):
        assert needle in docs, needle
    assert "docs/WORKFLOWS.md" in (ROOT / "README.md").read_text(encoding="utf-8")


def test_harness_loader_reads_on_as_a_key(tmp_path: Path) -> None:
    (tmp_path / "w.yml").write_text("on: push\njobs: {}\n", encoding="utf-8")
    assert load_workflow(tmp_path / "w.yml")["on"] == {"push": None}
