"""Bad input, beyond the corpus in tests/test_config.py: every case exits 2 with one line naming the file.

Hostile or broken configuration must fail fast and plainly: alias bombs and deep nesting under a
memory limit, files far over the size limit (refused by size, never read whole), things that are not
regular files (a FIFO would block for ever, /dev/zero never ends), wrong types, and absurd budgets.
Cases that could hang or exhaust memory run the real console script in a subprocess with an address
space limit and a timeout, so a regression fails the test instead of the machine.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from tests.clirun import run_cli
from tests.conftest import write_topic
from tests.test_config import GOOD

reliability = pytest.mark.reliability
MEMORY_LIMIT = 512 * 1024 * 1024



def bomb(levels: int = 12, width: int = 12) -> str:
    """A billion-laughs document: `width ** levels` nodes if aliases were expanded."""
    lines = ["l0: &l0 [" + ", ".join(["lol"] * width) + "]"]
    lines += [f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * width) + "]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def check_in_subprocess(repo: Path, *args: str, command: str = "check") -> subprocess.CompletedProcess[str]:
    """The installed CLI under a 512 MiB address-space limit and a timeout: a bomb fails the test, not us."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))

    return subprocess.run([sys.executable, "-m", "research_dispatch", command, "--repo", str(repo), *args],
                          capture_output=True, text=True, timeout=60, preexec_fn=limit, env=dict(os.environ))


def one_line(stderr: str, *fragments: str) -> str:
    """The one problem line (`error:`); warnings (`warning:`, e.g. about the fixture's judges) are not problems."""
    lines = [line for line in stderr.splitlines() if line.strip() and not line.startswith("warning: ")]
    assert len(lines) == 1, lines
    assert "Traceback" not in stderr
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


def check(repo: Path) -> tuple[int, str, str]:
    result = run_cli("check", "--repo", str(repo))
    return result.code, result.stdout, result.stderr


# -- memory and nesting --------------------------------------------------------------------------
@pytest.mark.slow
@reliability(area="input", case="alias bomb (12 levels × 12 aliases) in a topic file",
             expect="exit 2 under a 512 MiB memory limit, one line naming the file: 'YAML aliases/anchors are not "
                    "allowed'")
def test_alias_bomb_under_a_memory_limit(repo: Path) -> None:
    write_topic(repo, "01-tiny.yaml", GOOD + bomb())
    proc = check_in_subprocess(repo)
    assert proc.returncode == 2 and proc.stdout == ""
    one_line(proc.stderr, "topics/01-tiny.yaml", "are not allowed")


@pytest.mark.slow
@reliability(area="input", case="merge-key alias bomb (<<: *a)",
             expect="exit 2 under the memory limit, one line naming the file")
def test_merge_key_bomb(repo: Path) -> None:
    write_topic(repo, "01-tiny.yaml", GOOD + "a: &a {x: 1, y: 2}\nb: {<<: *a, z: 3}\n")
    proc = check_in_subprocess(repo)
    assert proc.returncode == 2
    one_line(proc.stderr, "topics/01-tiny.yaml", "not allowed")


@pytest.mark.slow
@reliability(area="input", case="alias bomb in a report's front matter (verify)",
             expect="`verify` exits 2 under the memory limit with one line naming the report")
def test_alias_bomb_in_a_report(repo: Path) -> None:
    report = repo / "research" / "02-diloco-family.md"
    report.parent.mkdir()
    report.write_text("---\n" + bomb() + "schema: research-dispatch/report@1\n---\n\n# Body\n", encoding="utf-8")
    proc = check_in_subprocess(repo, "research/02-diloco-family.md", command="verify")
    assert proc.returncode == 2
    one_line(proc.stderr, "research/02-diloco-family.md", "not allowed")


@reliability(area="input", case="deep nesting: 1,000 levels of flow sequences",
             expect="exit 2, one line naming the file: 'nesting deeper than 12 levels'")
def test_deep_sequence_nesting(repo: Path) -> None:
    write_topic(repo, "01-tiny.yaml", GOOD + "x: " + "[" * 1000 + "]" * 1000 + "\n")
    code, out, err = check(repo)
    assert code == 2 and out == ""
    one_line(err, "topics/01-tiny.yaml", "nesting deeper than 12 levels")


@reliability(area="input", case="deep nesting: 1,000 levels of flow mappings",
             expect="exit 2, one line naming the file: 'nesting deeper than 12 levels'")
def test_deep_mapping_nesting(repo: Path) -> None:
    write_topic(repo, "01-tiny.yaml", GOOD + "x: " + "{a: " * 1000 + "1" + "}" * 1000 + "\n")
    code, _, err = check(repo)
    assert code == 2
    one_line(err, "topics/01-tiny.yaml", "nesting deeper than 12 levels")


@pytest.mark.slow
@reliability(area="input", case="deep nesting: 30,000 levels (near the size limit)",
             expect="exit 2 under the memory limit, no RecursionError, one line naming the file")
def test_very_deep_nesting(repo: Path) -> None:
    write_topic(repo, "01-tiny.yaml", GOOD + "x: " + "[" * 30_000 + "]" * 30_000 + "\n")
    proc = check_in_subprocess(repo)
    assert proc.returncode == 2
    one_line(proc.stderr, "topics/01-tiny.yaml", "nesting")


# -- size and file kinds -------------------------------------------------------------------------
@pytest.mark.slow
@reliability(area="input", case="50 MB topic file",
             expect="refused by size before reading (a sparse file): exit 2, 'file is 52428800 bytes; the limit is "
                    "65536'")
def test_huge_topic_file(repo: Path) -> None:
    path = repo / "topics" / "01-tiny.yaml"
    with path.open("wb") as handle:
        handle.truncate(50 * 1024 * 1024)  # sparse: reading it whole would be the bug
    proc = check_in_subprocess(repo)
    assert proc.returncode == 2
    one_line(proc.stderr, "topics/01-tiny.yaml", "file is 52428800 bytes; the limit is 65536")


@reliability(area="input", case="2 MB pyproject.toml",
             expect="exit 2, one line: 'pyproject.toml: file is … bytes; the limit is 1048576'")
def test_huge_pyproject(repo: Path) -> None:
    (repo / "pyproject.toml").write_text("[tool.research-dispatch]\n" + "# padding\n" * 210_000, encoding="utf-8")
    code, _, err = check(repo)
    assert code == 2
    one_line(err, "pyproject.toml: file is", "the limit is 1048576")


@reliability(area="input", case="topic file that is a symlink to /etc/passwd",
             expect="exit 2, one line naming topics/01-tiny.yaml (not the target): 'resolves outside the "
                    "repository'; nothing of the target is read or printed")
def test_symlink_outside_the_repository(repo: Path) -> None:
    (repo / "topics" / "01-tiny.yaml").symlink_to("/etc/passwd")
    code, out, err = check(repo)
    assert code == 2 and out == ""
    line = one_line(err, "topics/01-tiny.yaml", "resolves outside the repository")
    assert "/etc/passwd" not in line and "root" not in err


@pytest.mark.slow
@reliability(area="input", case="topic file that is a FIFO",
             expect="exit 2 at once (no blocking read), one line: 'is not a regular file'")
def test_fifo_topic_file(repo: Path) -> None:
    os.mkfifo(repo / "topics" / "01-tiny.yaml")
    proc = check_in_subprocess(repo)
    assert proc.returncode == 2
    one_line(proc.stderr, "topics/01-tiny.yaml", "is not a regular file")


@reliability(area="input", case="a directory named like a topic file",
             expect="exit 2, one line: 'is a directory, not a file'")
def test_directory_named_like_a_topic(repo: Path) -> None:
    (repo / "topics" / "01-tiny.yaml").mkdir()
    code, _, err = check(repo)
    assert code == 2
    one_line(err, "topics/01-tiny.yaml", "is a directory, not a file")


@pytest.mark.slow
@reliability(area="input", case="pyproject.toml that is a symlink to /dev/zero",
             expect="exit 2 at once under the memory limit (never read): 'is not a regular file'")
def test_pyproject_is_dev_zero(repo: Path) -> None:
    (repo / "pyproject.toml").unlink()
    (repo / "pyproject.toml").symlink_to("/dev/zero")
    proc = check_in_subprocess(repo)
    assert proc.returncode == 2
    one_line(proc.stderr, "pyproject.toml", "is not a regular file")


# -- wrong types ---------------------------------------------------------------------------------
WRONG_TYPES = {
    "id-number": ("id: 123", None, "id"),
    "title-list": ("title: [a, b]", None, "title"),
    "title-null": ("title: null", None, "title"),
    "scope-mapping": ("scope: {a: 1}", None, "scope"),
    "models-mapping": ("models: {model: openai/gpt-5}", "models", "models"),
    "model-number": ("models: [{model: 5}]", "models", "models[0].model"),
    "model-entry-string": ("models: [openai/gpt-5]", "models", "models[0]"),
    "provider-bool": ("models: [{model: openai/gpt-5, provider: true}]", "models", "models[0].provider"),
    "rationale-number": ("models: [{model: openai/gpt-5, rationale: 42}]", "models", "models[0].rationale"),
    "words-string": ("words: many", None, "words"),
    "words-min-string": ("words: {min: '2000', max: 2500}", None, "words.min"),
    "budget-list": ("budget: [1, 2]", None, "budget"),
    "steps-bool": ("budget: {max_steps: true}", None, "budget.max_steps"),
    "steps-string": ("budget: {max_steps: '40'}", None, "budget.max_steps"),
    "cost-string": ("budget: {max_cost_usd: '3'}", None, "budget.max_cost_usd"),
    "results-fraction": ("search: {max_results: 5.5}", None, "search.max_results"),
    "domains-string": ("search: {include_domains: example.com}", None, "search.include_domains"),
}


@reliability(area="input", case="wrong type: {id}", expect="exit 2, one line naming the file and the field")
@pytest.mark.parametrize("case", sorted(WRONG_TYPES))
def test_wrong_types(repo: Path, case: str) -> None:
    line, replaces, field = WRONG_TYPES[case]
    key = line.split(":", 1)[0]
    if replaces:
        text = GOOD.split(f"{replaces}:")[0] + line + "\n"
    else:
        text = "\n".join(row for row in GOOD.splitlines() if not row.startswith(f"{key}:")) + "\n" + line + "\n"
    write_topic(repo, "01-tiny.yaml", text)
    code, out, err = check(repo)
    assert code == 2 and out == ""
    one_line(err, "topics/01-tiny.yaml", f"{field}:")


# -- absurd budgets ------------------------------------------------------------------------------
ABSURD_TOPIC = {
    "steps-zero": ("budget: {max_steps: 0}", "budget.max_steps"),
    "steps-negative": ("budget: {max_steps: -1}", "budget.max_steps"),
    "steps-billion": ("budget: {max_steps: 1000000000}", "budget.max_steps"),
    "steps-infinite": ("budget: {max_steps: .inf}", "budget.max_steps"),
    "cost-zero": ("budget: {max_cost_usd: 0}", "budget.max_cost_usd"),
    "cost-nan": ("budget: {max_cost_usd: .nan}", "budget.max_cost_usd"),
    "cost-infinite": ("budget: {max_cost_usd: .inf}", "budget.max_cost_usd"),
    "cost-trillion": ("budget: {max_cost_usd: 1.0e+12}", "budget.max_cost_usd"),
    "timeout-zero": ("budget: {timeout_minutes: 0}", "budget.timeout_minutes"),
    "timeout-nan": ("budget: {timeout_minutes: .nan}", "budget.timeout_minutes"),
    "timeout-huge": ("budget: {timeout_minutes: 1.0e+9}", "budget.timeout_minutes"),
    "words-tiny": ("words: {min: 0, max: 10}", "words.min"),
    "words-billion": ("words: {min: 100, max: 1000000000}", "words.max"),
    "results-zero": ("search: {max_results: 0}", "search.max_results"),
    "results-thousand": ("search: {max_results: 1000}", "search.max_results"),
    "too-many-models": ("models:\n" + "".join(f"  - model: openai/m{i}\n" for i in range(40)), "models"),
}


@reliability(area="input", case="absurd topic budget: {id}", expect="exit 2, one line naming the file and the field")
@pytest.mark.parametrize("case", sorted(ABSURD_TOPIC))
def test_absurd_topic_budgets(repo: Path, case: str) -> None:
    line, field = ABSURD_TOPIC[case]
    text = GOOD.split("models:")[0] + line if line.startswith("models:") else GOOD + line + "\n"
    write_topic(repo, "01-tiny.yaml", text)
    code, _, err = check(repo)
    assert code == 2
    # every problem of the file is listed, one line each (words-tiny has two: min and max)
    lines = [line for line in err.splitlines() if line.startswith("error: ")]
    assert lines and all("topics/01-tiny.yaml" in line for line in lines) and "Traceback" not in err, lines
    assert any(f"{field}:" in line for line in lines), lines


ABSURD_CONFIG = {
    "run-budget-nan": ("run_budget_usd = nan", "run_budget_usd"),
    "run-budget-infinite": ("run_budget_usd = inf", "run_budget_usd"),
    "run-budget-negative": ("run_budget_usd = -5", "run_budget_usd"),
    "run-budget-billion": ("run_budget_usd = 1e9", "run_budget_usd"),
    "jobs-zero": ("jobs = 0", "jobs"),
    "jobs-ten-thousand": ("jobs = 10000", "jobs"),
    "jobs-bool": ("jobs = true", "jobs"),
    "gateway-timeout-negative": ("gateway = {timeout_s = -1}", "gateway.timeout_s"),
    "gateway-timeout-nan": ("gateway = {timeout_s = nan}", "gateway.timeout_s"),
    "gateway-retries-thousand": ("gateway = {max_retries = 1000}", "gateway.max_retries"),
    "search-timeout-zero": ("search_service = {timeout_s = 0}", "search_service.timeout_s"),
    "default-steps-zero": ("budget = {max_steps = 0}", "budget.max_steps"),
    "default-cost-string": ("budget = {max_cost_usd = \"3\"}", "budget.max_cost_usd"),
}


@reliability(area="input", case="absurd pyproject setting: {id}",
             expect="exit 2, one line: 'pyproject.toml: tool.research-dispatch.<field>: …'")
@pytest.mark.parametrize("case", sorted(ABSURD_CONFIG))
def test_absurd_config(repo: Path, case: str) -> None:
    line, field = ABSURD_CONFIG[case]
    (repo / "pyproject.toml").write_text(f"[tool.research-dispatch]\n{line}\n", encoding="utf-8")
    code, _, err = check(repo)
    assert code == 2
    one_line(err, f"pyproject.toml: tool.research-dispatch.{field}:")


@reliability(area="input", case="title with a bidi override",
             expect="exit 2, one line: 'title: must not contain invisible or bidirectional control characters'")
def test_title_with_bidi_override(repo: Path) -> None:
    write_topic(repo, "01-tiny.yaml", GOOD.replace("Tiny topic", "Tiny \u202egnp.exe topic"))
    code, _, err = check(repo)
    assert code == 2
    one_line(err, "topics/01-tiny.yaml", "title: must not contain invisible or bidirectional control characters")
