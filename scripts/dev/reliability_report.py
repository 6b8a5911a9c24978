"""Generate docs/RELIABILITY.md from the reliability suite: each fault or hostile case, what the test
asserts happened, the test that proves it, and whether it held on this run.

Why generated: a hand-written table of "what we survive" rots the day a test changes. Here the rows
come from the tests themselves — every test marked `@pytest.mark.reliability(area=, case=, expect=)`
in tests/reliability and tests/bounds, plus the tests elsewhere listed in `REFERENCED` (the run and publish stages test
their own faults; they are run and reported here, not duplicated) — and "held" means the test passed
on the run that wrote the file.

    python scripts/dev/reliability_report.py           run the cases, write docs/RELIABILITY.md
    python scripts/dev/reliability_report.py --check   collect only; exit 1 if the file does not list
                                                   exactly the current cases (used by a test)
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "RELIABILITY.md"
SUITES = ("tests/reliability", "tests/bounds")
# Marked cases that live beside the feature they test (collected like SUITES).
MARKED_ELSEWHERE = ("tests/adopt/test_init_faults.py", "tests/test_neutralise.py")
COMMAND = ".venv/bin/python scripts/dev/reliability_report.py"

AREAS: tuple[tuple[str, str], ...] = (
    ("gateway", "Gateway faults"),
    ("search", "Search faults"),
    ("budget", "Budgets"),
    ("crash", "Crash safety and resume"),
    ("bounds", "Bounds: time, memory, exits"),
    ("refresh", "A refresh never loses work"),
    ("publish", "Publish faults"),
    ("hostile", "Hostile content"),
    ("secrets", "Secrets"),
    ("input", "Bad input"),
    ("records", "Records of earlier versions"),
)


@dataclass(frozen=True)
class Referenced:
    """A test outside tests/reliability that proves a case; `test` is a node id (without parameters,
    every parametrised instance becomes a row, `{id}` in `case` naming it)."""

    area: str
    case: str
    expect: str
    test: str


REFERENCED: tuple[Referenced, ...] = (
    Referenced("budget", "run-level dollar cap",
               "legs already running finish; no new leg starts once run_budget_usd is reached; the others are "
               "listed 'not started: run budget reached'; exit 1",
               "tests/run/test_run_legs.py::test_run_budget_stops_new_legs_but_lets_running_ones_finish"),
    Referenced("crash", "`run` killed (SIGKILL) during a leg's writing call, then run again",
               "the previous report is intact, no temp file is left; the next run replaces the stale lock and "
               "redoes exactly that leg",
               "tests/run/test_run_lock.py::test_killed_mid_run_leaves_no_partial_report_and_the_next_run_redoes"
               "_exactly_that_leg"),
    Referenced("crash", "resume: re-running after a failed leg and after a topic edit",
               "only the failed leg runs, then only the edited one; good legs are kept; --fresh redoes all",
               "tests/run/test_run_resume.py::test_second_run_keeps_good_legs_and_redoes_failed_and_changed_ones"),
    Referenced("crash", "resume: a re-run that fails",
               "the old report is kept and the leg is redone on the next run ('last attempt failed')",
               "tests/run/test_run_resume.py::test_a_failed_rerun_keeps_the_old_report_and_is_redone_next_time"),
    Referenced("crash", "two runs on the same repository at once",
               "the second is refused by the lock with one clear line naming the holder's pid and the lock file; "
               "exit 1; no request made",
               "tests/run/test_run_lock.py::test_a_second_run_is_refused_while_the_lock_is_held"),
    Referenced("crash", "a stale lock left by a dead process",
               "replaced with a warning naming the dead pid; the run proceeds",
               "tests/run/test_run_lock.py::test_a_stale_lock_from_a_dead_process_is_replaced_with_a_warning"),
    Referenced("crash", "Ctrl-C during a run",
               "no new leg starts, the running leg is recorded as interrupted, the lock is released; exit 1",
               "tests/run/test_run_lock.py::test_ctrl_c_stops_new_legs_releases_the_lock_and_exits_1"),
    Referenced("publish", "GitHub 5xx on creating the PR", "retried; exactly one PR",
               "tests/publish/test_publish_faults.py::test_a_5xx_on_create_is_retried_and_gives_one_pr"),
    Referenced("publish", "GitHub 5xx on every attempt",
               "a clear error after 4 attempts; the commits are safe on the pushed branch; a re-run makes one PR "
               "without rewriting the branch",
               "tests/publish/test_publish_faults.py::test_a_persistent_5xx_fails_clearly_and_a_rerun_completes"
               "_with_one_pr"),
    Referenced("publish", "422 'pull request already exists' (the create succeeded but its answer was lost, "
                          "so the retry gets 422)",
               "the existing PR is found and updated, never duplicated: one PR",
               "tests/publish/test_publish_faults.py::test_a_lost_create_answer_is_found_and_updated_not_duplicated"),
    Referenced("publish", "GitHub rate limit with Retry-After", "waits exactly Retry-After, then one PR",
               "tests/publish/test_publish_faults.py::test_rate_limit_waits_for_retry_after_then_succeeds"),
    Referenced("publish", "GitHub rate limit that does not clear",
               "a clear 'rate limit' error before anything is pushed; no PR",
               "tests/publish/test_publish_faults.py::test_rate_limit_that_does_not_clear_is_a_clear_failure_before"
               "_the_push"),
    Referenced("publish", "GitHub rate limit asking for a wait beyond the cap",
               "not waited; a clear error naming the wait",
               "tests/publish/test_publish_faults.py::test_a_rate_limit_wait_longer_than_the_cap_is_not_waited"),
    Referenced("publish", "connection dropped by GitHub", "retried; the same PR is updated",
               "tests/publish/test_publish_faults.py::test_a_dropped_connection_is_retried"),
    Referenced("publish", "push rejected: a human pushed to the branch meanwhile",
               "their commit is kept (no force push), the PR gets a comment, exit 1; still one PR",
               "tests/publish/test_publish_faults.py::test_push_rejected_because_a_human_pushed_meanwhile_keeps"
               "_their_commit"),
    Referenced("publish", "push rejected: the branch keeps moving",
               "stops with 'push refused twice … nothing was overwritten'; the other commits are kept",
               "tests/publish/test_publish_faults.py::test_a_branch_that_keeps_moving_stops_with_a_clear_error"),
    Referenced("publish", "push refused by the remote (protected branch)",
               "a clear 'git push failed' error with the remote's reason; no PR",
               "tests/publish/test_publish_faults.py::test_push_failure_other_than_a_lease_is_a_clear_error"),
    Referenced("publish", "a human commit already on the refresh branch",
               "not overwritten; the bot comments instead",
               "tests/publish/test_publish_flow.py::test_a_human_commit_on_the_branch_is_not_overwritten"),
    Referenced("publish", "stray and staged files in the repository",
               "only computed paths are committed; the user's staged file stays staged",
               "tests/publish/test_publish_flow.py::test_only_computed_paths_are_committed"),
    Referenced("hostile", "hostile status reasons and provider names in the PR body",
               "one bot marker only, no mention, issue reference (`fixes #1`, `owner/repo#2`, `GH-7`), link, image, "
               "autolink or math GitHub would act on (rendered and read with its patterns), no bidi or zero-width "
               "characters, no raw HTML, no extra table column; commit messages carry none of it",
               "tests/publish/test_publish_body.py::test_model_text_is_sanitised_in_the_pr_body"),
    Referenced("secrets", "publish with a failed leg, a blocked push and a dry run",
               "no canary in the tree, .git, the origin, `git log -p --all`, refs, the PR, comments or requests",
               "tests/publish/test_publish_secrets.py::test_canary_keys_appear_nowhere"),
    Referenced("secrets", "the GitHub token on its way to git",
               "only through the environment as an extra header, never in argv, config files or error messages",
               "tests/publish/test_publish_secrets.py::test_the_token_reaches_git_only_through_the_environment"),
    Referenced("input", "bad topic file: {id}", "exit 2, one line naming the file and the field",
               "tests/test_config.py::test_bad_topic_file_exits_2_with_one_line_naming_the_file"),
    Referenced("input", "`run --json` refused before it starts (bad --topics, missing keys)",
               "exit 2 and still one run@1 document on stdout: nothing run, `error` the one line stderr says",
               "tests/firsthour/test_json.py::test_run_json_on_bad_input_is_still_one_document"),
    Referenced("hostile", "a judge's verdict rewritten inside the committed claims ledger",
               "not replayed (no call record of the entry names its hash): a warning naming framework/claims.json, "
               "the citation asked again (1 check call) and its honest verdict kept",
               "tests/synthesis/test_citation_checks.py::test_a_verdict_edited_in_the_ledger_is_asked_again_not_"
               "replayed"),
    Referenced("budget", "the gateway reports a cost below the endpoint's listed price ({id})",
               "the call counts at the listed price for the tokens it counted; the reported figure is kept as "
               "`reported_cost_usd` (the flag); a cost at or above the listed price is taken as reported",
               "tests/test_gateway_wire.py::test_a_cost_below_the_listed_price_is_replaced_by_the_priced_figure_and"
               "_flagged"),
    Referenced("budget", "a stray second usage chunk of 2 tokens and $0.0000001 after the real one",
               "the usage that counts the most tokens is kept: the call is billed at the real usage",
               "tests/test_gateway_wire.py::test_a_second_tiny_usage_chunk_cannot_shrink_what_the_call_is_billed_at"),
)

# Cases the issue asks for that no test covers yet (rendered as "pending", counted apart).
PENDING: tuple[tuple[str, str, str], ...] = ()


@dataclass
class Case:
    area: str
    case: str
    expect: str
    test: str
    outcome: str = "not run"  # passed | failed | skipped | not run | pending | missing

    @property
    def held(self) -> bool:
        return self.outcome == "passed"


def _base(nodeid: str) -> str:
    return nodeid.split("[", 1)[0]


class Recorder:
    """A pytest plugin: keeps only the reliability cases, and records each one's outcome."""

    def __init__(self) -> None:
        self.cases: dict[str, Case] = {}
        self.referenced = {r.test: r for r in REFERENCED}
        self.found: set[str] = set()

    def pytest_collection_modifyitems(self, session: Any, config: Any, items: list[Any]) -> None:
        keep, drop = [], []
        for item in items:
            case = self._case(item)
            if case is None:
                drop.append(item)
            else:
                keep.append(item)
                self.cases[item.nodeid] = case
        if drop:
            config.hook.pytest_deselected(items=drop)
        items[:] = keep

    def _case(self, item: Any) -> Case | None:
        param = getattr(getattr(item, "callspec", None), "id", "")
        marker = item.get_closest_marker("reliability")
        if marker is not None:
            info = {"area": marker.kwargs["area"], "case": marker.kwargs["case"], "expect": marker.kwargs["expect"]}
        elif _base(item.nodeid) in self.referenced:
            ref = self.referenced[_base(item.nodeid)]
            self.found.add(ref.test)
            info = {"area": ref.area, "case": ref.case, "expect": ref.expect}
        else:
            return None
        if info["area"] not in dict(AREAS):
            raise ValueError(f"{item.nodeid}: unknown reliability area {info['area']!r}")
        return Case(info["area"], info["case"].replace("{id}", param), info["expect"].replace("{id}", param),
                    item.nodeid)

    def pytest_runtest_logreport(self, report: Any) -> None:
        case = self.cases.get(report.nodeid)
        if case is None:
            return
        if report.failed:
            case.outcome = "failed"
        elif report.skipped and case.outcome != "failed":
            case.outcome = "skipped"
        elif report.when == "call" and report.passed and case.outcome == "not run":
            case.outcome = "passed"

    def all_cases(self) -> list[Case]:
        cases = list(self.cases.values())
        for ref in REFERENCED:
            if ref.test not in self.found:
                cases.append(Case(ref.area, ref.case, ref.expect, ref.test, "missing"))
        cases += [Case(area, case, expect, "—", "pending") for area, case, expect in PENDING]
        order = {area: i for i, (area, _) in enumerate(AREAS)}
        return sorted(cases, key=lambda c: (order[c.area], c.case.lower(), c.test))


def collect(run: bool) -> tuple[int, list[Case]]:
    recorder = Recorder()
    files = sorted({_base(r.test).split("::", 1)[0] for r in REFERENCED})
    args = ["-q", "-p", "no:cacheprovider", "-o", "addopts=", "--rootdir", str(ROOT), *SUITES, *MARKED_ELSEWHERE,
            *files]
    if not run:
        args.append("--collect-only")
    code = pytest.main(args, plugins=[recorder])
    return int(code), recorder.all_cases()


# -- rendering -----------------------------------------------------------------------------------
def cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


ICONS = {"passed": "✅ held", "failed": "❌ NOT held", "skipped": "❌ skipped", "not run": "❌ not run",
         "missing": "❌ test missing", "pending": "⏳ pending"}


def render(cases: list[Case]) -> str:
    counted = [c for c in cases if c.outcome != "pending"]
    held = sum(c.held for c in counted)
    pending = len(cases) - len(counted)
    lines = [
        "# Reliability and security: the fault matrix",
        "",
        "A refresh runs unattended twice a year, spends real money, and feeds untrusted web text to models "
        "whose output lands in a pull request. Each row below is one fault or hostile case, what the test "
        "asserts happened, and the test that proves it — run through the real `openai`, `tavily-python` "
        "and `PyGithub` clients against the offline fakes (docs/FAKES.md), or, for what the research loop "
        "and the synthesis do with a reply that arrived, the product's own code over a scripted model at "
        "the model seam (tests/seam.py). *Held* means the test passed on the run that generated this file.",
        "",
        "Generated by `scripts/dev/reliability_report.py` — do not edit by hand. Regenerate with "
        f"`make reliability-doc` (or `{COMMAND}`); `tests/reliability/test_doc.py` fails when this file "
        "no longer lists exactly the current cases.",
        "",
        f"**{held} of {len(counted)} cases held.**" + (f" {pending} pending (no test yet)." if pending else ""),
        "",
        "| area | cases | held |",
        "|---|---:|---:|",
    ]
    for area, title in AREAS:
        mine = [c for c in counted if c.area == area]
        extra = sum(1 for c in cases if c.area == area and c.outcome == "pending")
        lines.append(f"| [{title}](#{_anchor(title)}) | {len(mine)} | {sum(c.held for c in mine)}"
                     + (f" (+{extra} pending)" if extra else "") + " |")
    lines.append(f"| **total** | **{len(counted)}** | **{held}** |")
    for area, title in AREAS:
        lines += ["", f"## {title}", "", "| case | what happened | test | held? |", "|---|---|---|---|"]
        for c in (c for c in cases if c.area == area):
            test = f"`{c.test}`" if c.test != "—" else "—"
            lines.append(f"| {cell(c.case)} | {cell(c.expect)} | {test} | {ICONS[c.outcome]} |")
    return "\n".join(lines) + "\n"


def _anchor(title: str) -> str:
    return re.sub(r"[^a-z0-9 -]", "", title.lower()).replace(" ", "-")


_ROW = re.compile(r"^\| (?P<case>.*?) \| (?P<expect>.*?) \| (?P<test>`[^`]+`|—) \| (?P<held>[^|]+) \|$")


def listed(text: str) -> list[tuple[str, str, str]]:
    """(case, expect, test) of every row in a rendered file."""
    return [(m["case"], m["expect"], m["test"].strip("`")) for m in map(_ROW.match, text.splitlines()) if m]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="collect only; fail if the doc is out of date")
    args = parser.parse_args(argv)
    code, cases = collect(run=not args.check)
    if args.check:
        if code != 0:
            print("reliability-doc: collection failed", file=sys.stderr)
            return 1
        want = [(cell(c.case), cell(c.expect), c.test) for c in cases]
        have = listed(DOC.read_text(encoding="utf-8")) if DOC.exists() else []
        if sorted(want) != sorted(have):
            missing = sorted(set(want) - set(have))[:5]
            stale = sorted(set(have) - set(want))[:5]
            print(f"reliability-doc: {DOC.relative_to(ROOT)} is out of date; run `make reliability-doc`\n"
                  f"  not in the file: {missing}\n  no longer a case: {stale}", file=sys.stderr)
            return 1
        print(f"reliability-doc: up to date ({len(cases)} cases)")
        return 0
    DOC.write_text(render(cases), encoding="utf-8")
    counted = [c for c in cases if c.outcome != "pending"]
    print(f"wrote {DOC.relative_to(ROOT)}: {sum(c.held for c in counted)} of {len(counted)} cases held")
    return 0 if all(c.held for c in counted) else 1


if __name__ == "__main__":
    sys.exit(main())
