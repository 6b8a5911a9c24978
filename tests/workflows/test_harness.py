"""The harness behaves like GitHub where the workflow tests rely on it: expressions, command files,
artifact paths, step and job semantics, reusable-workflow contracts."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

import pytest

from tests.workflows.conftest import git
from tests.workflows.expressions import ExpressionError, Scope, Unsupported, condition, evaluate, parse, render
from tests.workflows.runner_harness import Machine, Runner, WorkflowError, find_upload_files, parse_command_file


def ev(text: str, **contexts: object) -> object:
    base = {"inputs": {}, "needs": {}, "matrix": {}, "github": {}, "vars": {}, "secrets": {}, "steps": {}}
    return evaluate(parse(text), Scope({**base, **contexts}, lambda f: f != "cancelled" and f != "failure"))


@pytest.mark.parametrize(("text", "expected"), [
    ("inputs.cycle || 'current-cycle'", "current-cycle"),
    ("fromJSON(inputs.max-parallel || '4')", 4),
    ("!inputs.dry-run", True),
    ("'Success' == 'success'", True),  # string comparison ignores case
    ("1 == '1'", True),  # mismatched types compare as numbers
    ("null == 0", True),
    ("'' && 'x'", ""),  # && and || return an operand
    ("'a' && 'b'", "b"),
    ("!cancelled() && 'x' != 'y'", True),
    ("(true || false) && !(false)", True),
    ("fromJSON('{\"include\": [{\"leg\": \"a\"}]}').include[0].leg", "a"),
])
def test_expressions(text: str, expected: object) -> None:
    assert ev(text) == expected


def test_expression_contexts_and_errors() -> None:
    assert ev("inputs.dry-run", inputs={"dry-run": True}) is True
    assert ev("needs.plan.outputs.count != '0'", needs={"plan": {"outputs": {"count": "0"}}}) is False
    assert ev("matrix.LEG", matrix={"leg": "x"}) == "x"  # lookups are case-insensitive
    with pytest.raises(ExpressionError, match="not a job listed"):
        ev("needs.other.result", needs={"plan": {"result": "success"}})
    with pytest.raises(Unsupported):
        ev("contains('abc', 'b')")
    with pytest.raises(Unsupported):
        ev("1 < 2")
    with pytest.raises(ExpressionError):
        ev("nosuchcontext.x")


def test_render_and_conditions() -> None:
    scope = Scope({"inputs": {"cycle": "2026-H1"}, "matrix": {"leg": "01-a"}}, lambda f: f == "success")
    assert render("leg-${{ matrix.leg }}", scope) == "leg-01-a"
    assert render("${{ fromJSON('3') }}", scope) == 3  # a lone expression keeps its type
    assert render("research-refresh-${{ inputs.cycle || 'x' }}", scope) == "research-refresh-2026-H1"
    failed = Scope({"inputs": {}}, lambda f: f == "failure")
    assert condition(None, failed) is False  # the implied success()
    assert condition("${{ !cancelled() }}", failed) is True
    assert condition("inputs.x == ''", failed) is False


def test_command_files() -> None:
    text = "plain=1\nmatrix<<EOF_abc\n{\"a\":\n1}\nEOF_abc\nempty=\n"
    assert parse_command_file(text) == {"plain": "1", "matrix": "{\"a\":\n1}", "empty": ""}
    with pytest.raises(WorkflowError, match="delimiter"):
        parse_command_file("x<<EOF\nno end\n")


def test_upload_paths_and_roots(tmp_path: Path) -> None:
    for rel in ("research/a.md", "framework/b.md", "build/legs/c.json", "build/traces/d.jsonl", "research/.hidden"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x", encoding="utf-8")
    files, root = find_upload_files(tmp_path, "research/\nframework/\nbuild/legs/\n", include_hidden=False)
    assert root == tmp_path.resolve()  # several paths: their least common ancestor
    assert [p.relative_to(root).as_posix() for p in files] == ["build/legs/c.json", "framework/b.md", "research/a.md"]
    files, root = find_upload_files(tmp_path, "build/", include_hidden=False)
    assert root == (tmp_path / "build").resolve()  # one directory: it is the root
    files, root = find_upload_files(tmp_path, "research/a.md", include_hidden=False)
    assert root == (tmp_path / "research").resolve() and len(files) == 1  # one file: its folder
    files, _ = find_upload_files(tmp_path, "build/**/*.json\n!build/legs/c.json", include_hidden=False)
    assert files == []


# -- small workflows through the runner ---------------------------------------------------------------
@pytest.fixture
def mini(tmp_path: Path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "hello.txt").write_text("hi\n", encoding="utf-8")
    git(tmp_path, "init", "-q", "-b", "main", str(src))
    git(src, "add", "-A")
    git(src, "commit", "-q", "-m", "init")
    origin = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(origin))
    git(src, "push", "-q", str(origin), "main")
    (tmp_path / ".github" / "workflows").mkdir(parents=True)
    env = {"PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
           "HOME": str(tmp_path)}
    machine = Machine(workflows_root=tmp_path, origin=origin, work=tmp_path / "runner", env=env,
                      secrets={"KEY": "s3cret-value"}, github_token="ghs_write")

    def run(files: dict[str, str], name: str, event: str = "workflow_dispatch", inputs: dict | None = None):
        for file, text in files.items():
            (tmp_path / ".github" / "workflows" / file).write_text(textwrap.dedent(text), encoding="utf-8")
        return Runner(machine).run(name, event, inputs)

    return run


CHECKOUT = "actions/checkout@3d3c42e5aac5ba805825da76410c181273ba90b1"


def test_steps_outputs_env_and_continue_on_error(mini) -> None:
    run = mini({"w.yml": f"""
        on: {{workflow_dispatch: {{inputs: {{word: {{type: string, default: hi}}}}}}}}
        permissions: {{}}
        jobs:
          one:
            permissions: {{contents: read}}
            timeout-minutes: 5
            outputs: {{said: "${{{{ steps.say.outputs.said }}}}"}}
            steps:
              - uses: {CHECKOUT}
                with: {{persist-credentials: false}}
              - id: say
                env: {{WORD: "${{{{ inputs.word }}}}"}}
                run: |
                  cat hello.txt
                  echo "said=$WORD" >> "$GITHUB_OUTPUT"
                  echo "LATER=yes" >> "$GITHUB_ENV"
                  echo "# summary" >> "$GITHUB_STEP_SUMMARY"
              - run: test "$LATER" = yes
              - continue-on-error: true
                run: exit 3
              - run: git push origin HEAD:refs/heads/x
                continue-on-error: true
              - if: failure()
                run: echo never
          two:
            needs: one
            permissions: {{contents: read}}
            timeout-minutes: 5
            if: ${{{{ needs.one.outputs.said == 'HELLO' }}}}
            steps:
              - run: exit 1
          three:
            needs: two
            permissions: {{contents: read}}
            timeout-minutes: 5
            steps:
              - run: "true"
    """}, "w.yml", inputs={"word": "hello"})
    one = run.job("one").instance
    assert [s.outcome for s in one.steps] == ["success", "success", "success", "failure", "failure", "skipped"]
    assert one.steps[1].stdout == "hi\n" and one.summary == "# summary\n"
    assert run.job("one").result == "success" and run.job("one").outputs == {"said": "hello"}
    assert one.steps[4].exit_code != 0  # a job without contents: write cannot push
    assert run.job("two").result == "failure"
    assert run.job("three").result == "skipped"  # implied success() over needs


def test_matrix_fail_fast_and_max_parallel(mini) -> None:
    run = mini({"m.yml": """
        on: workflow_dispatch
        permissions: {}
        jobs:
          legs:
            permissions: {contents: read}
            timeout-minutes: 5
            strategy:
              max-parallel: 1
              matrix: {n: [1, 2, 3]}
            steps:
              - env: {N: "${{ matrix.n }}"}
                run: test "$N" != 1
    """}, "m.yml")
    legs = run.job("legs")
    assert legs.max_parallel == 1 and legs.peak_parallel == 1
    assert [i.result for i in legs.instances] == ["failure", "cancelled", "cancelled"]  # fail-fast defaults to true


def test_reusable_call_contract(mini) -> None:
    callee = """
        on:
          workflow_call:
            inputs: {flag: {type: boolean, default: false}}
            secrets: {KEY: {required: true}}
        permissions: {}
        jobs:
          inner:
            permissions: {contents: write}
            timeout-minutes: 5
            steps:
              - env: {KEY: "${{ secrets.KEY }}", FLAG: "${{ inputs.flag }}"}
                run: test "$KEY" = s3cret-value && test "$FLAG" = false
    """
    caller = """
        on: {schedule: [{cron: "17 6 1 1,7 *"}]}
        permissions: {}
        jobs:
          call:
            permissions: {contents: %s}
            uses: ./.github/workflows/callee.yml
            secrets: {KEY: "${{ secrets.KEY }}"}
    """
    run = mini({"callee.yml": callee, "caller.yml": caller % "write"}, "caller.yml", event="schedule")
    assert run.job("call/inner").result == "success" and run.conclusion == "success"
    with pytest.raises(WorkflowError, match="is only allowed 'contents: read'"):
        mini({"caller.yml": caller % "read"}, "caller.yml", event="schedule")
    with pytest.raises(WorkflowError, match="secret 'KEY' is required"):
        mini({"caller.yml": (caller % "write").replace('secrets: {KEY: "${{ secrets.KEY }}"}', "")},
             "caller.yml", event="schedule")
