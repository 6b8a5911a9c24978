"""A small GitHub Actions runner for this project's workflow files, for the end-to-end workflow tests.

It loads a workflow, builds the job graph and runs each job's steps in `needs` order for one event
(`workflow_dispatch` with inputs, `schedule`, and `workflow_call` through a job-level `uses: ./...`), so
that the *workflow file itself* is what gets tested: a typo in a flag, a wrong output name, a missing
`env:` mapping or a bad `if:` fails a test.

What runs for real
  * Every `run:` step: its script is written to a file and run with `bash --noprofile --norc -eo
    pipefail` (GitHub's `shell: bash`) in the job's own checkout, with the step's `env:` evaluated from
    the expression contexts, and `GITHUB_OUTPUT`, `GITHUB_STEP_SUMMARY`, `GITHUB_ENV` and `GITHUB_PATH`
    as fresh files per step. Outputs (`key=value` and the heredoc form) become `steps.<id>.outputs`,
    summaries are kept per step, `GITHUB_ENV`/`GITHUB_PATH` apply to later steps.
  * Expressions (`expressions.py`): only the subset the files use; anything else raises `Unsupported`.
  * Job semantics: `needs` order, job `if:` (with the implied `success()`), `outputs:`, the matrix
    (evaluated — so `fromJSON(needs.plan.outputs.matrix)` is expanded from the real plan output — one job
    instance per entry, at most `max-parallel` at once, `fail-fast`), step `if:`, `continue-on-error`,
    `timeout-minutes` (as a deadline on the job's processes), and each job's result (success, failure,
    skipped, cancelled). The concurrency group is evaluated and recorded (runs are not queued).
  * Reusable workflows: a job with `uses: ./.github/workflows/x.yml` runs x.yml with the caller's event,
    its `with:` inputs (validated against `on.workflow_call.inputs`, defaults applied) and only the
    secrets passed explicitly (validated against `on.workflow_call.secrets`); a called job asking for more
    permissions than the caller job grants is refused, as GitHub refuses such a run. A job with
    `uses: owner/name/.github/workflows/x.yml@ref` runs x.yml as it is at `ref` in that other repository
    (`Machine.repositories`: its bare origin), on the caller's event and checkout, like GitHub.
  * The `job` context's workflow identity (`job.workflow_repository`, `job.workflow_sha`,
    `job.workflow_ref`, `job.workflow_file_path`): the repository and commit of the file that defines
    the running job — the called repository inside a remote reusable workflow, the caller's otherwise.

What is emulated, and only as much as it means here
  * `actions/checkout`: a fresh git checkout of the test repository from its local bare origin, at
    `github.ref` (or `with.ref`: a branch, a tag or a full commit sha), honouring `fetch-depth` (default 1:
    one commit of that ref; 0: every branch and tag); `repository` (another repository of
    `Machine.repositories`) and `path` (a directory inside the workspace). `persist-credentials` must be
    `false` (nothing else is emulated). A job without `contents: write` gets an origin it cannot push to,
    like a read-only token.
  * `actions/setup-python`: a no-op (the test's virtualenv — with `research-dispatch` — is first on PATH);
    with `cache:` set, `cache-dependency-path` must match a file in the checkout, as the real action fails
    otherwise.
  * **The install step** — a `run:` whose every line is `python -m pip install ...` (in this project:
    `pip install --require-hashes -r .research-dispatch/requirements.lock` then
    `pip install --no-deps ./.research-dispatch`) — is a no-op, recognised by its content: the package is
    already installed in the virtualenv (`Machine.env`'s PATH). The harness only checks that the files
    it names (the `-r` file, a `pyproject.toml` in the directory installed) exist in the checkout.
  * `actions/upload-artifact` / `actions/download-artifact`: a folder per artifact under
    `Run.artifacts`, honouring `name`, `path` (multi-line, globs, `!` excludes, the least-common-ancestor
    root, hidden files left out), `if-no-files-found`, unique names per run, and on download `name`,
    `pattern`, `merge-multiple` and `path`.
  * `actions/create-github-app-token`: when its `if:` holds (the `REFRESH_APP_CLIENT_ID` variable is
    set), it checks `client-id`/`private-key` are non-empty and outputs the test's `app_token`; with the
    variable empty it is skipped by its own `if:` like any step.
  * `secrets.GITHUB_TOKEN` / `github.token`: the test's token in jobs granted `contents: write` or
    `pull-requests: write`; `Machine.issues_token` (which the fake GitHub lets read and write issues only)
    in jobs granted `issues: write`; `Machine.read_token` (which the fake GitHub lets read, never write) in
    jobs granted `pull-requests: read` or `actions: read`; a token the fake GitHub rejects in every other job.
  * "Re-run failed jobs" (`Runner.rerun_failed`): a new attempt of the same run (`github.run_attempt`
    2, the same artifacts, so an upload of an existing name needs `overwrite: true` as on GitHub) that
    runs again the jobs that failed or were cancelled — of a matrix job only its failed instances — and
    every job that depends on one of them; the other jobs keep their results and outputs.
Not emulated: containers and services, caches, composite or Docker actions, other remote actions, job
`env:`/`defaults:` beyond `run.shell: bash`, `workflow_dispatch` of a workflow from a step. A workflow
using any of them raises `Unsupported`.
"""

from __future__ import annotations

import fnmatch
import glob
import itertools
import os
import re
import shutil
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.workflows.expressions import (
    ExpressionError,
    Scope,
    Unsupported,
    condition,
    render,
    render_str,
    to_string,
)

SHA_PIN = re.compile(r"^(?P<action>[\w.-]+/[\w.-]+)@(?P<sha>[0-9a-f]{40})$")
REMOTE_WORKFLOW = re.compile(
    r"^(?P<repo>[\w.-]+/[\w.-]+)/(?P<path>\.github/workflows/[\w.-]+\.ya?ml)@(?P<ref>[\w./-]+)$")
INSTALL_LINE = re.compile(r"^python3? -m pip install(?:\s|$)")
ARTIFACT_NAME_FORBIDDEN = set('":<>|*?\r\n\\/')
PERMISSION_LEVEL = {"none": 0, "read": 1, "write": 2}
JOB_KEYS = {"name", "needs", "if", "runs-on", "timeout-minutes", "permissions", "strategy", "outputs", "steps",
            "uses", "with", "secrets", "concurrency"}
STEP_KEYS = {"id", "name", "if", "uses", "with", "run", "env", "continue-on-error", "shell", "working-directory",
             "timeout-minutes"}
READ_ONLY_TOKEN = "ghs_read_only_token_of_a_job_without_write_permissions"
READ_TOKEN = "ghs_read_token_of_a_job_with_pull_requests_read"
ISSUES_TOKEN = "ghs_issues_token_of_a_job_with_issues_write"


class WorkflowError(Exception):
    """GitHub would refuse to start this run (bad inputs, bad reusable-workflow call, ...)."""


def load_workflow(path: Path) -> dict[str, Any]:
    """Parse a workflow file; YAML 1.1 reads the `on:` key as True, so it is put back under "on"."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise WorkflowError(f"{path}: not a mapping")
    if True in data:
        data["on"] = data.pop(True)
    triggers = data.get("on")
    if isinstance(triggers, str):
        data["on"] = {triggers: None}
    elif isinstance(triggers, list):
        data["on"] = {name: None for name in triggers}
    return data


def job_order(jobs: Mapping[str, Any]) -> list[str]:
    """Jobs in an order that respects `needs` (stable: file order among ready jobs)."""
    needs = {job: _needs(spec) for job, spec in jobs.items()}
    for job, wanted in needs.items():
        for other in wanted:
            if other not in jobs:
                raise WorkflowError(f"job {job!r} needs unknown job {other!r}")
    order: list[str] = []
    while len(order) < len(jobs):
        ready = [j for j in jobs if j not in order and all(n in order for n in needs[j])]
        if not ready:
            raise WorkflowError("the jobs' `needs` form a cycle")
        order.append(ready[0])
    return order


def _needs(spec: Mapping[str, Any]) -> list[str]:
    value = spec.get("needs") or []
    return [value] if isinstance(value, str) else list(value)


# -- records -----------------------------------------------------------------------------------------
@dataclass
class StepRun:
    index: int
    id: str | None
    name: str
    kind: str  # run | install | uses:<action> | skipped
    outcome: str  # success | failure | skipped
    conclusion: str
    outputs: dict[str, str] = field(default_factory=dict)
    summary: str = ""
    stdout: str = ""
    stderr: str = ""
    exit_code: int | None = None
    env: dict[str, str] = field(default_factory=dict)  # the step's own `env:`, evaluated
    files: dict[str, str] = field(default_factory=dict)  # raw GITHUB_OUTPUT / GITHUB_ENV text


@dataclass
class JobInstance:
    job_id: str
    name: str
    matrix: dict[str, Any]
    workspace: Path
    result: str = "success"
    steps: list[StepRun] = field(default_factory=list)
    outputs: dict[str, str] = field(default_factory=dict)

    @property
    def summary(self) -> str:
        return "".join(step.summary for step in self.steps)

    def step(self, name_or_id: str) -> StepRun:
        for step in self.steps:
            if name_or_id in (step.id, step.name):
                return step
        raise KeyError(f"{self.job_id}: no step {name_or_id!r}; steps: {[s.name for s in self.steps]}")


@dataclass
class JobRun:
    job_id: str
    result: str  # success | failure | skipped | cancelled
    permissions: dict[str, str]
    needs: list[str] = field(default_factory=list)
    outputs: dict[str, str] = field(default_factory=dict)
    instances: list[JobInstance] = field(default_factory=list)
    called: Run | None = None
    max_parallel: int | None = None
    peak_parallel: int = 0
    error: str | None = None

    @property
    def instance(self) -> JobInstance:
        if len(self.instances) != 1:
            raise AssertionError(f"{self.job_id} ran {len(self.instances)} instances")
        return self.instances[0]

    @property
    def summary(self) -> str:
        return "".join(instance.summary for instance in self.instances)


@dataclass
class Run:
    workflow: Path
    event: str
    inputs: dict[str, Any]
    artifacts: Path
    jobs: dict[str, JobRun] = field(default_factory=dict)
    concurrency_group: str | None = None
    source: WorkflowSource | None = None
    attempt: int = 1
    ref: str = "refs/heads/main"

    def job(self, job_id: str) -> JobRun:
        """A job by id; `caller/callee` reaches into a reusable workflow's run."""
        head, _, rest = job_id.partition("/")
        job = self.jobs[head]
        if rest:
            assert job.called is not None, f"{head} did not call a workflow"
            return job.called.job(rest)
        return job

    @property
    def conclusion(self) -> str:
        results = {job.result for job in self.jobs.values()}
        return "failure" if "failure" in results else "cancelled" if "cancelled" in results else "success"

    def all_jobs(self) -> Iterator[JobRun]:
        for job in self.jobs.values():
            yield job
            if job.called is not None:
                yield from job.called.all_jobs()

    def texts(self) -> Iterator[tuple[str, str]]:
        """(where, text) for every log, summary, output file and artifact file of the run."""
        for job in self.all_jobs():
            for inst in job.instances:
                for step in inst.steps:
                    where = f"{inst.job_id}[{inst.name}] step {step.name!r}"
                    yield f"{where} stdout", step.stdout
                    yield f"{where} stderr", step.stderr
                    yield f"{where} summary", step.summary
                    for name, text in step.files.items():
                        yield f"{where} {name}", text
                yield f"{inst.job_id}[{inst.name}] outputs", repr(inst.outputs)
        for path in sorted(self.artifacts.rglob("*")):
            if path.is_file():
                yield f"artifact {path.relative_to(self.artifacts)}", path.read_text(encoding="utf-8", errors="replace")


# -- the runner --------------------------------------------------------------------------------------
@dataclass
class Machine:
    """The runner machine and the repository's settings: what a workflow run sees besides its file."""

    workflows_root: Path  # the directory holding .github/workflows (reusable `./` paths resolve here)
    origin: Path  # the bare repository actions/checkout clones (the "GitHub" repository)
    work: Path  # scratch: job workspaces, runner temp, artifacts
    env: dict[str, str]  # the machine's environment (PATH with the venv first, fake service URLs, ...)
    secrets: dict[str, str] = field(default_factory=dict)
    vars: dict[str, str] = field(default_factory=dict)
    github_token: str = ""
    read_token: str = READ_TOKEN  # the GITHUB_TOKEN of a job granted only `pull-requests: read` or `actions: read`
    issues_token: str = ISSUES_TOKEN  # the GITHUB_TOKEN of a job granted `issues: write` (and no other write)
    app_token: str | None = None
    repository: str = "acme/review"
    server_url: str = "https://github.com"
    api_url: str = "https://api.github.com"
    run_id: str = "4242"
    actor: str = "mia"
    # other repositories on "GitHub": owner/name -> bare origin (remote reusable workflows, checkouts)
    repositories: dict[str, Path] = field(default_factory=dict)


@dataclass(frozen=True)
class WorkflowSource:
    """Where a workflow file came from: what the `job` context's workflow_* properties report."""

    repository: str
    sha: str
    ref: str
    file_path: str

    def job_context(self) -> dict[str, str]:
        return {"workflow_repository": self.repository, "workflow_sha": self.sha,
                "workflow_ref": f"{self.repository}/{self.file_path}@{self.ref}",
                "workflow_file_path": self.file_path}


class Runner:
    def __init__(self, machine: Machine) -> None:
        self.m = machine
        self._artifact_lock = threading.Lock()
        self._counter = itertools.count(1)

    # -- entry point -------------------------------------------------------------------------------
    def run(self, workflow: str | Path, event: str, inputs: Mapping[str, Any] | None = None,
            ref: str = "refs/heads/main") -> Run:
        path = self._workflow_path(workflow)
        data = load_workflow(path)
        triggers = data.get("on") or {}
        if event not in triggers:
            raise WorkflowError(f"{path.name} is not triggered by {event!r} (it has {sorted(triggers)})")
        if event == "workflow_dispatch":
            resolved = self._dispatch_inputs((triggers.get(event) or {}).get("inputs") or {}, dict(inputs or {}))
        elif inputs:
            raise WorkflowError(f"{event} carries no inputs")
        else:
            resolved = {}
        sha = self._git("--git-dir", str(self.m.origin), "rev-parse", ref).strip()
        artifacts = self.m.work / "artifacts"
        artifacts.mkdir(parents=True, exist_ok=True)
        github = self._github_context(event, ref, sha, path, resolved if event == "workflow_dispatch" else None)
        source = WorkflowSource(self.m.repository, sha, ref, f".github/workflows/{path.name}")
        run = self._run_workflow(path, data, github, resolved, dict(self.m.secrets), artifacts, cap=None, prefix="",
                                 source=source)
        run.ref = ref
        return run

    def rerun_failed(self, previous: Run) -> Run:
        """GitHub's "Re-run failed jobs" on `previous`: attempt n+1 of the same run, same event, inputs,
        commit and artifacts; the failed or cancelled jobs (of a matrix, the failed instances) and their
        dependents run again, every other job keeps its result and outputs."""
        data = load_workflow(previous.workflow)
        assert previous.source is not None
        sha = previous.source.sha
        github = self._github_context(previous.event, previous.ref, sha, previous.workflow,
                                      previous.inputs if previous.event == "workflow_dispatch" else None)
        github["run_attempt"] = str(previous.attempt + 1)
        run = self._run_workflow(previous.workflow, data, github, dict(previous.inputs), dict(self.m.secrets),
                                 previous.artifacts, cap=None, prefix=f"attempt{previous.attempt + 1}-",
                                 source=previous.source, previous=previous)
        run.attempt, run.ref = previous.attempt + 1, previous.ref
        return run

    def _workflow_path(self, workflow: str | Path) -> Path:
        path = Path(workflow)
        if not path.is_absolute():
            path = self.m.workflows_root / ".github" / "workflows" / path
        return path

    def _github_context(self, event: str, ref: str, sha: str, path: Path,
                        dispatch_inputs: dict[str, Any] | None) -> dict[str, Any]:
        owner = self.m.repository.split("/", 1)[0]
        payload: dict[str, Any] = {"repository": {"full_name": self.m.repository}}
        if dispatch_inputs is not None:
            payload["inputs"] = {k: to_string(v) for k, v in dispatch_inputs.items()}
        if event == "schedule":
            payload["schedule"] = "scheduled"
        return {"event_name": event, "event": payload, "ref": ref, "ref_name": ref.rsplit("/", 1)[-1], "sha": sha,
                "repository": self.m.repository, "repository_owner": owner, "run_id": self.m.run_id,
                "run_number": "1", "run_attempt": "1", "server_url": self.m.server_url, "api_url": self.m.api_url,
                "actor": self.m.actor, "workflow": path.name, "workflow_ref": f"{self.m.repository}/.github/"
                f"workflows/{path.name}@{ref}"}

    @staticmethod
    def _dispatch_inputs(spec: Mapping[str, Any], given: dict[str, Any]) -> dict[str, Any]:
        unknown = set(given) - set(spec)
        if unknown:
            raise WorkflowError(f"unexpected inputs: {sorted(unknown)}")
        resolved: dict[str, Any] = {}
        for name, meta in spec.items():
            meta = meta or {}
            kind = meta.get("type", "string")
            if name in given:
                value = given[name]
            elif meta.get("required") and "default" not in meta:
                raise WorkflowError(f"input {name!r} is required")
            else:
                value = meta.get("default", False if kind == "boolean" else "")
            if kind == "boolean":
                if isinstance(value, str):
                    if value.lower() not in ("true", "false"):
                        raise WorkflowError(f"input {name!r} must be true or false, not {value!r}")
                    value = value.lower() == "true"
                value = bool(value)
            elif kind == "choice":
                value = to_string(value)
                if value not in [to_string(o) for o in meta.get("options") or []]:
                    raise WorkflowError(f"input {name!r}: {value!r} is not one of {meta.get('options')}")
            elif kind == "number":
                value = float(value)
            else:
                value = to_string(value)
            resolved[name] = value
        return resolved

    # -- a workflow ---------------------------------------------------------------------------------
    def _run_workflow(self, path: Path, data: dict[str, Any], github: dict[str, Any], inputs: dict[str, Any],
                      secrets: dict[str, str], artifacts: Path, cap: dict[str, str] | None, prefix: str,
                      source: WorkflowSource, previous: Run | None = None) -> Run:
        run = Run(workflow=path, event=github["event_name"], inputs=inputs, artifacts=artifacts, source=source)
        for key in data:
            if key not in {"name", "on", "permissions", "concurrency", "defaults", "jobs", "run-name"}:
                raise Unsupported(f"{path.name}: top-level {key!r}")
        defaults = ((data.get("defaults") or {}).get("run") or {})
        if set(defaults) - {"shell"} or defaults.get("shell", "bash") != "bash":
            raise Unsupported(f"{path.name}: defaults.run other than shell: bash")
        base_scope = {"github": github, "inputs": inputs, "vars": dict(self.m.vars)}
        concurrency = data.get("concurrency")
        if concurrency is not None:
            group = concurrency.get("group") if isinstance(concurrency, dict) else concurrency
            run.concurrency_group = render_str(group, Scope(base_scope))
        jobs = data.get("jobs") or {}
        again: set[str] = set()  # on a re-run: the jobs that run again (failed ones and their dependents)
        for job_id in job_order(jobs):
            spec = jobs[job_id]
            unknown = set(spec) - JOB_KEYS
            if unknown:
                raise Unsupported(f"{path.name}: job {job_id} uses {sorted(unknown)}")
            permissions = self._permissions(data, spec)
            if cap is not None:
                self._check_cap(path, job_id, permissions, cap)
            before = previous.jobs.get(job_id) if previous is not None else None
            if before is not None:
                if before.result not in ("failure", "cancelled") and not again & set(_needs(spec)):
                    run.jobs[job_id] = before  # kept: its result, outputs and artifacts stand
                    continue
                again.add(job_id)
                if "uses" in spec:
                    raise Unsupported("re-running a failed reusable-workflow call")
            keep = {i: inst for i, inst in enumerate(before.instances) if inst.result == "success"} \
                if before is not None and before.result in ("failure", "cancelled") else {}
            run.jobs[job_id] = self._run_job(run, job_id, spec, permissions, base_scope, secrets, prefix, keep)
        return run

    @staticmethod
    def _permissions(data: Mapping[str, Any], spec: Mapping[str, Any]) -> dict[str, str]:
        value = spec.get("permissions", data.get("permissions"))
        if value is None:
            raise Unsupported("a job without explicit permissions (the repository default is not emulated)")
        if isinstance(value, str):
            raise Unsupported(f"permissions: {value}")
        return {str(k): str(v) for k, v in value.items()}

    @staticmethod
    def _check_cap(path: Path, job_id: str, wanted: Mapping[str, str], cap: Mapping[str, str]) -> None:
        for scope, level in wanted.items():
            if PERMISSION_LEVEL[level] > PERMISSION_LEVEL[cap.get(scope, "none")]:
                raise WorkflowError(f"{path.name}: the nested job {job_id!r} is requesting '{scope}: {level}', "
                                    f"but is only allowed '{scope}: {cap.get(scope, 'none')}'")

    @staticmethod
    def _job_status(run: Run, spec: Mapping[str, Any]) -> Any:
        """Job-level status functions: over every job this one depends on, directly or not."""
        ancestors: set[str] = set()
        frontier = _needs(spec)
        while frontier:
            name = frontier.pop()
            if name not in ancestors:
                ancestors.add(name)
                frontier += run.jobs[name].needs
        results = [run.jobs[name].result for name in ancestors]

        def status(function: str) -> bool:
            if function == "always":
                return True
            if function == "cancelled":
                return False  # nothing cancels a run here
            if function == "failure":
                return any(r == "failure" for r in results)
            return all(r == "success" for r in results)

        return status

    def _run_job(self, run: Run, job_id: str, spec: Mapping[str, Any], permissions: dict[str, str],
                 base_scope: dict[str, Any], secrets: dict[str, str], prefix: str,
                 keep: Mapping[int, JobInstance] | None = None) -> JobRun:
        needs = {name: {"result": run.jobs[name].result, "outputs": dict(run.jobs[name].outputs)}
                 for name in _needs(spec)}
        record = JobRun(job_id=job_id, result="skipped", permissions=permissions, needs=_needs(spec))
        if permissions.get("contents") == "write" or permissions.get("pull-requests") == "write":
            token = self.m.github_token
        elif permissions.get("issues") == "write":
            token = self.m.issues_token
        elif "read" in (permissions.get("pull-requests"), permissions.get("actions")):
            token = self.m.read_token
        else:
            token = READ_ONLY_TOKEN
        github = {**base_scope["github"], "token": token, "job": job_id}
        job_secrets = {**secrets, "GITHUB_TOKEN": token}
        scope_base = {**base_scope, "github": github, "needs": needs, "secrets": job_secrets, "matrix": {},
                      "strategy": {}, "runner": {"os": "Linux", "arch": "X64"},
                      "job": run.source.job_context() if run.source else {}}
        status = self._job_status(run, spec)
        if "uses" in spec:  # a bad call (inputs, secrets, permissions) is refused at startup: it raises
            if not condition(spec.get("if"), Scope(scope_base, status)):
                return record
            return self._call_workflow(run, job_id, spec, permissions, scope_base, job_secrets, prefix, record)
        try:
            if not condition(spec.get("if"), Scope(scope_base, status)):
                return record
            timeout = float(render(spec.get("timeout-minutes", 360), Scope(scope_base)))
            entries, fail_fast, max_parallel = self._matrix(spec, scope_base)
        except (ExpressionError, WorkflowError) as exc:
            record.result, record.error = "failure", str(exc)
            return record
        record.max_parallel = max_parallel
        record.result = "success"
        instances: list[JobInstance] = []
        failed = threading.Event()
        running = [0]
        lock = threading.Lock()

        def one(index: int, entry: dict[str, Any]) -> JobInstance:
            if keep and index in keep:  # a re-run: this matrix instance succeeded and is not run again
                return keep[index]
            scope = {**scope_base, "matrix": entry, "strategy": {"fail-fast": fail_fast, "max-parallel": max_parallel,
                                                                 "job-index": index, "job-total": len(entries)}}
            name = render_str(spec.get("name", job_id), Scope(scope))
            tag = f"{prefix}{job_id}-{index}-{next(self._counter)}"
            inst = JobInstance(job_id=job_id, name=name, matrix=entry, workspace=self.m.work / "jobs" / tag / "ws")
            if fail_fast and failed.is_set():
                inst.result = "cancelled"
                return inst
            with lock:
                running[0] += 1
                record.peak_parallel = max(record.peak_parallel, running[0])
            try:
                self._run_steps(run, inst, spec, scope, permissions, time.monotonic() + timeout * 60)
            finally:
                with lock:
                    running[0] -= 1
            if inst.result == "failure":
                failed.set()
            return inst

        if len(entries) == 1:
            instances = [one(0, entries[0])]
        else:
            with ThreadPoolExecutor(max_workers=max_parallel) as pool:
                instances = list(pool.map(lambda pair: one(*pair), enumerate(entries)))
        record.instances = instances
        results = {inst.result for inst in instances}
        record.result = "failure" if "failure" in results else "cancelled" if "cancelled" in results else "success"
        for inst in instances:  # like GitHub, a matrix job's outputs come from whichever instance set them
            record.outputs.update({k: v for k, v in inst.outputs.items() if v != ""})
        return record

    def _matrix(self, spec: Mapping[str, Any], scope: dict[str, Any]) -> tuple[list[dict[str, Any]], bool, int]:
        strategy = spec.get("strategy")
        if strategy is None:
            return [{}], True, 1
        unknown = set(strategy) - {"matrix", "fail-fast", "max-parallel"}
        if unknown:
            raise Unsupported(f"strategy keys {sorted(unknown)}")
        matrix = render(strategy.get("matrix"), Scope(scope))
        if not isinstance(matrix, dict):
            raise WorkflowError(f"strategy.matrix evaluated to {matrix!r}, not a mapping")
        include = matrix.get("include") or []
        axes = {k: v for k, v in matrix.items() if k not in ("include", "exclude")}
        if matrix.get("exclude") or (axes and include):
            raise Unsupported("matrix include/exclude combined with axes")
        if axes:
            keys = list(axes)
            entries = [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*(axes[k] for k in keys))]
        else:
            if not isinstance(include, list) or not all(isinstance(e, dict) for e in include):
                raise WorkflowError("matrix include must be a list of mappings")
            entries = [dict(e) for e in include]
        if not entries:
            raise WorkflowError("the matrix has no entries (GitHub fails the job)")
        if len(entries) > 256:
            raise WorkflowError(f"a matrix may generate at most 256 jobs, this one {len(entries)}")
        fail_fast = render(strategy.get("fail-fast", True), Scope(scope))
        max_parallel = render(strategy.get("max-parallel", len(entries)), Scope(scope))
        if isinstance(max_parallel, str) or not float(max_parallel).is_integer() or int(max_parallel) < 1:
            raise WorkflowError(f"max-parallel must be a positive integer, got {max_parallel!r}")
        return entries, bool(fail_fast), int(max_parallel)

    # -- reusable workflows -------------------------------------------------------------------------
    def _call_workflow(self, run: Run, job_id: str, spec: Mapping[str, Any], permissions: dict[str, str],
                       scope: dict[str, Any], secrets: dict[str, str], prefix: str, record: JobRun) -> JobRun:
        uses = str(spec["uses"])
        if uses.startswith("./.github/workflows/"):
            path = self.m.workflows_root / uses[2:]
            assert run.source is not None
            source = WorkflowSource(run.source.repository, run.source.sha, run.source.ref, uses[2:])
        else:
            path, source = self._remote_workflow(uses, prefix, job_id)
        data = load_workflow(path)
        call = (data.get("on") or {})
        if "workflow_call" not in call:
            raise WorkflowError(f"{uses} has no workflow_call trigger")
        contract = call.get("workflow_call") or {}
        with_values = render(spec.get("with") or {}, Scope(scope))
        input_spec = contract.get("inputs") or {}
        unknown = set(with_values) - set(input_spec)
        if unknown:
            raise WorkflowError(f"{uses}: unknown inputs {sorted(unknown)}")
        inputs: dict[str, Any] = {}
        for name, meta in input_spec.items():
            meta = meta or {}
            kind = meta.get("type")
            if name in with_values:
                value = with_values[name]
            elif meta.get("required"):
                raise WorkflowError(f"{uses}: input {name!r} is required")
            else:
                value = meta.get("default", {"boolean": False, "number": 0}.get(kind, ""))
            if kind == "boolean" and not isinstance(value, bool):
                raise WorkflowError(f"{uses}: input {name!r} must be a boolean, got {value!r}")
            if kind == "string":
                value = to_string(value)
            inputs[name] = value
        passed = spec.get("secrets") or {}
        secret_spec = contract.get("secrets") or {}
        if passed == "inherit":
            callee_secrets = dict(secrets)
        else:
            unknown = set(passed) - set(secret_spec)
            if unknown:
                raise WorkflowError(f"{uses}: unknown secrets {sorted(unknown)}")
            callee_secrets = {name: to_string(render(value, Scope(scope))) for name, value in passed.items()}
            for name, meta in secret_spec.items():
                if (meta or {}).get("required") and not callee_secrets.get(name):
                    raise WorkflowError(f"{uses}: secret {name!r} is required")
        called = self._run_workflow(path, data, dict(scope["github"], workflow=path.name), inputs, callee_secrets,
                                    run.artifacts, cap=permissions, prefix=f"{prefix}{job_id}--", source=source)
        record.called = called
        record.result = called.conclusion
        return record

    def _remote_workflow(self, uses: str, prefix: str, job_id: str) -> tuple[Path, WorkflowSource]:
        """`owner/name/.github/workflows/x.yml@ref`: the file as it is at `ref` in that repository."""
        match = REMOTE_WORKFLOW.match(uses)
        if not match:
            raise WorkflowError(f"invalid reusable workflow reference {uses!r} (owner/name/.github/workflows/"
                                "file.yml@ref)")
        repository, file_path, ref = match.group("repo"), match.group("path"), match.group("ref")
        origin = self.m.repositories.get(repository)
        if origin is None:
            raise WorkflowError(f"{uses}: repository {repository} not found (or not accessible)")
        try:
            sha = self._git("--git-dir", str(origin), "rev-parse", "--verify", f"{ref}^{{commit}}").strip()
            text = self._git("--git-dir", str(origin), "show", f"{sha}:{file_path}")
        except ActionFailed as exc:
            raise WorkflowError(f"{uses}: cannot resolve {ref} or {file_path} in {repository}: {exc}") from None
        if ref != sha and re.fullmatch(r"[0-9a-f]{7,39}", ref):
            raise WorkflowError(f"{uses}: a commit must be given as its full 40-character sha")
        path = self.m.work / "remote-workflows" / f"{prefix}{job_id}" / Path(file_path).name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return path, WorkflowSource(repository, sha, ref, file_path)

    # -- steps --------------------------------------------------------------------------------------
    def _run_steps(self, run: Run, inst: JobInstance, spec: Mapping[str, Any], scope: dict[str, Any],
                   permissions: dict[str, str], deadline: float) -> None:
        inst.workspace.mkdir(parents=True)
        temp = inst.workspace.parent / "tmp"
        temp.mkdir()
        steps_ctx: dict[str, Any] = {}
        job_env: dict[str, str] = {}
        path_prefix: list[str] = []
        state = {"failed": False}
        github = {**scope["github"], "workspace": str(inst.workspace)}
        scope = {**scope, "github": github, "steps": steps_ctx}

        def status(function: str) -> bool:
            return {"always": True, "cancelled": False, "failure": state["failed"]}.get(function, not state["failed"])

        for index, step in enumerate(spec.get("steps") or []):
            unknown = set(step) - STEP_KEYS
            if unknown:
                raise Unsupported(f"step keys {sorted(unknown)}")
            step_scope = Scope({**scope, "env": job_env}, status)
            name = render_str(step.get("name") or step.get("uses") or str(step.get("run", "")).split("\n")[0],
                              Scope({**scope, "env": job_env}))
            record = StepRun(index=index, id=step.get("id"), name=name, kind="skipped", outcome="skipped",
                             conclusion="skipped")
            try:
                run_it = condition(step.get("if"), step_scope)
                if run_it:
                    env = {k: to_string(v) for k, v in render(step.get("env") or {}, step_scope).items()}
                    record.env = env
                    if time.monotonic() > deadline:
                        raise TimeoutError("the job exceeded its timeout-minutes")
                    if "uses" in step:
                        self._uses(run, inst, step, step_scope, permissions, record)
                    else:
                        self._run_script(inst, step, env, job_env, path_prefix, temp, github, scope, deadline, record)
            except (ExpressionError, WorkflowError, TimeoutError, OSError, subprocess.SubprocessError) as exc:
                record.kind = record.kind if record.kind != "skipped" else "error"
                record.outcome = "failure"
                record.stderr += f"\n[harness] {type(exc).__name__}: {exc}"
            if record.outcome != "skipped":
                record.conclusion = record.outcome
                if record.outcome == "failure" and truthy_flag(render(step.get("continue-on-error", False),
                                                                     Scope({**scope, "env": job_env}))):
                    record.conclusion = "success"
                if record.conclusion == "failure":
                    state["failed"] = True
            if record.id:
                steps_ctx[record.id] = {"outputs": dict(record.outputs), "outcome": record.outcome,
                                        "conclusion": record.conclusion}
            inst.steps.append(record)
        inst.result = "failure" if state["failed"] else "success"
        out_scope = Scope({**scope, "env": job_env})
        for key, value in (spec.get("outputs") or {}).items():
            inst.outputs[key] = render_str(value, out_scope)

    def _run_script(self, inst: JobInstance, step: Mapping[str, Any], env: dict[str, str], job_env: dict[str, str],
                    path_prefix: list[str], temp: Path, github: Mapping[str, Any], scope: Mapping[str, Any],
                    deadline: float, record: StepRun) -> None:
        script = str(step["run"])
        if step.get("shell", "bash") != "bash":
            raise Unsupported(f"shell {step.get('shell')!r}")
        lines = [line.strip() for line in script.splitlines() if line.strip() and not line.strip().startswith("#")]
        if lines and all(INSTALL_LINE.match(line) for line in lines):
            self._install(inst.workspace, lines, record)
            return
        record.kind = "run"
        files = {name: temp / f"{name.lower()}_{uuid.uuid4().hex}" for name in
                 ("GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY", "GITHUB_ENV", "GITHUB_PATH")}
        for path in files.values():
            path.write_text("", encoding="utf-8")
        script_path = temp / f"step-{record.index}-{uuid.uuid4().hex}.sh"
        script_path.write_text(script, encoding="utf-8")
        full_env = dict(self.m.env)
        if path_prefix:
            full_env["PATH"] = os.pathsep.join([*path_prefix, full_env.get("PATH", "")])
        full_env.update(self._runner_env(inst, github, temp))
        full_env.update({name: str(path) for name, path in files.items()})
        full_env.update(job_env)
        full_env.update(env)
        cwd = inst.workspace / str(render_str(step.get("working-directory", "."), Scope(dict(scope))))
        timeout = max(1.0, deadline - time.monotonic())
        step_timeout = step.get("timeout-minutes")
        if step_timeout is not None:
            timeout = min(timeout, float(step_timeout) * 60)
        proc = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script_path)], cwd=cwd,
                              env=full_env, capture_output=True, text=True, timeout=timeout, check=False)
        record.exit_code = proc.returncode
        record.stdout, record.stderr = proc.stdout, proc.stderr
        record.outcome = "success" if proc.returncode == 0 else "failure"
        output_text = files["GITHUB_OUTPUT"].read_text(encoding="utf-8")
        env_text = files["GITHUB_ENV"].read_text(encoding="utf-8")
        record.files = {"GITHUB_OUTPUT": output_text, "GITHUB_ENV": env_text}
        record.outputs = parse_command_file(output_text)
        job_env.update(parse_command_file(env_text))
        path_prefix[:0] = [line for line in files["GITHUB_PATH"].read_text(encoding="utf-8").splitlines()[::-1]
                           if line.strip()]
        record.summary = files["GITHUB_STEP_SUMMARY"].read_text(encoding="utf-8")

    def _runner_env(self, inst: JobInstance, github: Mapping[str, Any], temp: Path) -> dict[str, str]:
        return {"CI": "true", "GITHUB_ACTIONS": "true", "GITHUB_WORKSPACE": str(inst.workspace),
                "GITHUB_REPOSITORY": str(github["repository"]),
                "GITHUB_REPOSITORY_OWNER": str(github["repository_owner"]),
                "GITHUB_RUN_ID": str(github["run_id"]), "GITHUB_RUN_NUMBER": str(github["run_number"]),
                "GITHUB_RUN_ATTEMPT": str(github["run_attempt"]), "GITHUB_SERVER_URL": str(github["server_url"]),
                "GITHUB_API_URL": str(github["api_url"]), "GITHUB_EVENT_NAME": str(github["event_name"]),
                "GITHUB_REF": str(github["ref"]), "GITHUB_REF_NAME": str(github["ref_name"]),
                "GITHUB_SHA": str(github["sha"]), "GITHUB_JOB": inst.job_id, "GITHUB_ACTOR": str(github["actor"]),
                "GITHUB_WORKFLOW": str(github["workflow"]), "RUNNER_TEMP": str(temp), "RUNNER_OS": "Linux",
                "RUNNER_ARCH": "X64"}

    @staticmethod
    def _install(workspace: Path, lines: list[str], record: StepRun) -> None:
        """The emulated install step: a no-op, after checking the files it names exist in the checkout."""
        record.kind = "install"
        problems = []
        for line in lines:
            words = line.split()
            for flag, value in itertools.pairwise(words):
                if flag in ("-r", "--requirement") and not (workspace / value).is_file():
                    problems.append(f"{value} not found in the checkout")
            target = words[-1]
            local = not target.startswith("-") and (target == "." or target.startswith(("./", "/"))
                                                     or target.endswith("/"))
            if local and not (workspace / target / "pyproject.toml").is_file():
                problems.append(f"pyproject.toml not found in {target} of the checkout")
        record.outcome = "failure" if problems else "success"
        record.stdout = "[harness] install step emulated (the package is installed in the test virtualenv)\n"
        record.stderr = "\n".join(problems)

    # -- actions ------------------------------------------------------------------------------------
    def _uses(self, run: Run, inst: JobInstance, step: Mapping[str, Any], scope: Scope,
              permissions: dict[str, str], record: StepRun) -> None:
        uses = str(step["uses"])
        match = SHA_PIN.match(uses)
        if not match:
            raise Unsupported(f"action reference {uses!r} (remote actions must be pinned to a full commit sha)")
        action = match.group("action")
        record.kind = f"uses:{action}"
        with_ = {k: to_string(v) for k, v in render(step.get("with") or {}, scope).items()}
        handler = {"actions/checkout": self._checkout, "actions/setup-python": self._setup_python,
                   "actions/upload-artifact": self._upload, "actions/download-artifact": self._download,
                   "actions/create-github-app-token": self._app_token}.get(action)
        if handler is None:
            raise Unsupported(f"action {action}")
        try:
            handler(run, inst, with_, permissions, record, scope)
            record.outcome = "success"
        except ActionFailed as exc:
            record.outcome = "failure"
            record.stderr += f"::error::{exc}\n"

    def _checkout(self, run: Run, inst: JobInstance, with_: dict[str, str], permissions: dict[str, str],
                  record: StepRun, scope: Scope) -> None:
        unknown = set(with_) - {"persist-credentials", "fetch-depth", "ref", "repository", "path"}
        if unknown:
            raise Unsupported(f"actions/checkout inputs {sorted(unknown)}")
        if with_.get("persist-credentials", "true").lower() != "false":
            raise Unsupported("actions/checkout without persist-credentials: false")
        depth = int(with_.get("fetch-depth", "1") or "1")
        repository = with_.get("repository") or self.m.repository
        if repository == self.m.repository:
            origin = self.m.origin
            default_ref = str(scope.contexts["github"]["ref"])
        elif repository in self.m.repositories:
            origin = self.m.repositories[repository]
            default_ref = "refs/heads/" + self._git("--git-dir", str(origin), "symbolic-ref", "--short", "HEAD").strip()
        else:
            raise ActionFailed(f"repository {repository!r} not found")
        ref = with_.get("ref") or default_ref
        ws = inst.workspace
        target = (ws / with_.get("path", "")).resolve()
        if target != ws.resolve() and ws.resolve() not in target.parents:
            raise ActionFailed(f"Repository path '{target}' is not under '{ws}'")
        url = origin.resolve().as_uri()
        self._git("init", "-q", str(target))
        self._git("-C", str(target), "remote", "add", "origin", url)
        if re.fullmatch(r"[0-9a-f]{40}", ref):  # a commit: fetch what holds it, check it out detached
            self._git("-C", str(target), "fetch", "-q", "origin", "+refs/heads/*:refs/remotes/origin/*",
                      "+refs/tags/*:refs/tags/*")
            self._git("-C", str(target), "checkout", "-q", "--force", "--detach", ref)
        else:
            name = ref.removeprefix("refs/heads/").removeprefix("refs/tags/")
            kind = "tags" if ref.startswith("refs/tags/") else "heads"
            local = f"refs/tags/{name}" if kind == "tags" else f"refs/remotes/origin/{name}"
            if depth == 0:
                self._git("-C", str(target), "fetch", "-q", "--prune", "origin",
                          "+refs/heads/*:refs/remotes/origin/*", "+refs/tags/*:refs/tags/*")
            else:
                self._git("-C", str(target), "fetch", "-q", "--no-tags", f"--depth={depth}", "origin",
                          f"+refs/{kind}/{name}:{local}")
            if kind == "tags":
                self._git("-C", str(target), "checkout", "-q", "--force", "--detach", local)
            else:
                self._git("-C", str(target), "checkout", "-q", "--force", "-B", name, local)
        if permissions.get("contents") != "write":  # a read-only token cannot push
            self._git("-C", str(target), "config", "remote.origin.pushurl",
                      (self.m.work / "no-push-without-contents-write").as_uri())
        record.stdout = f"[harness] checked out {repository}@{ref} (fetch-depth {depth}) into {target}\n"

    def _setup_python(self, run: Run, inst: JobInstance, with_: dict[str, str], permissions: dict[str, str],
                      record: StepRun, scope: Scope) -> None:
        if with_.get("cache"):
            patterns = [p.strip() for p in with_.get("cache-dependency-path", "").splitlines() if p.strip()]
            if not patterns or not any(glob.glob(str(inst.workspace / p)) for p in patterns):
                raise ActionFailed(f"No file in {inst.workspace} matched to [{', '.join(patterns)}], make sure you "
                                   "have checked out the target repository")
        record.stdout = "[harness] setup-python emulated (the test virtualenv is first on PATH)\n"

    def _app_token(self, run: Run, inst: JobInstance, with_: dict[str, str], permissions: dict[str, str],
                   record: StepRun, scope: Scope) -> None:
        if not with_.get("client-id") or not with_.get("private-key"):
            raise ActionFailed("[@octokit/auth-app] appId/clientId and privateKey are required")
        if self.m.app_token is None:
            raise Unsupported("a GitHub App token was requested but the test gave no app_token")
        record.outputs = {"token": self.m.app_token, "installation-id": "1", "app-slug": "research-dispatch"}
        record.stdout = "[harness] GitHub App installation token minted (emulated)\n"

    def _upload(self, run: Run, inst: JobInstance, with_: dict[str, str], permissions: dict[str, str],
                record: StepRun, scope: Scope) -> None:
        unknown = set(with_) - {"name", "path", "if-no-files-found", "retention-days", "include-hidden-files",
                                "overwrite"}
        if unknown:
            raise Unsupported(f"actions/upload-artifact inputs {sorted(unknown)}")
        name = with_.get("name") or "artifact"
        bad = ARTIFACT_NAME_FORBIDDEN & set(name)
        if bad or not name.strip():
            raise ActionFailed(f"The artifact name is not valid: {name!r} contains {sorted(bad)}")
        files, root = find_upload_files(inst.workspace, with_.get("path", ""),
                                        with_.get("include-hidden-files", "false").lower() == "true")
        if not files:
            mode = with_.get("if-no-files-found", "warn")
            message = (f"No files were found with the provided path: {with_.get('path', '')}. "
                       "No artifacts will be uploaded.")
            if mode == "error":
                raise ActionFailed(message)
            record.stdout = (f"::warning::{message}\n" if mode == "warn" else message + "\n")
            return
        with self._artifact_lock:
            target = run.artifacts / name
            if target.exists():
                if with_.get("overwrite", "false").lower() != "true":
                    raise ActionFailed("Failed to CreateArtifact: (409) Conflict: an artifact with this name "
                                       "already exists on the workflow run")
                shutil.rmtree(target)
            target.mkdir(parents=True)
            for path in files:
                rel = path.relative_to(root)
                if ARTIFACT_NAME_FORBIDDEN - {"/"} & set(rel.as_posix()):
                    raise ActionFailed(f"The path for one of the files in artifact is not valid: {rel}")
                (target / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, target / rel)
        record.outputs = {"artifact-id": str(abs(hash(name)) % 10**9), "artifact-url": f"artifact://{name}"}
        record.stdout = f"[harness] uploaded {len(files)} file(s) as artifact {name!r}\n"

    def _download(self, run: Run, inst: JobInstance, with_: dict[str, str], permissions: dict[str, str],
                  record: StepRun, scope: Scope) -> None:
        unknown = set(with_) - {"name", "path", "pattern", "merge-multiple"}
        if unknown:
            raise Unsupported(f"actions/download-artifact inputs {sorted(unknown)}")
        destination = inst.workspace / with_["path"] if with_.get("path") else inst.workspace
        name = with_.get("name", "")
        merge = with_.get("merge-multiple", "false").lower() == "true"
        with self._artifact_lock:
            available = sorted(p.name for p in run.artifacts.iterdir() if p.is_dir())
            if name:
                if name not in available:
                    raise ActionFailed(f"Unable to download artifact(s): Artifact '{name}' not found")
                chosen, single = [name], True
            else:
                pattern = with_.get("pattern", "")
                chosen = [a for a in available if not pattern or fnmatch.fnmatchcase(a, pattern)]
                single = False
            for artifact in chosen:
                target = destination if single or merge else destination / artifact
                shutil.copytree(run.artifacts / artifact, target, dirs_exist_ok=True)
        record.outputs = {"download-path": str(destination)}
        record.stdout = f"[harness] downloaded {len(chosen)} artifact(s): {', '.join(chosen) or 'none'}\n"

    # -- git ----------------------------------------------------------------------------------------
    def _git(self, *args: str) -> str:
        env = {k: v for k, v in self.m.env.items() if not k.startswith("GIT_")}
        env.update({"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0"})
        proc = subprocess.run(["git", *args], env=env, capture_output=True, text=True, check=False, timeout=120)
        if proc.returncode != 0:
            raise ActionFailed(f"git {' '.join(args)}: {proc.stderr.strip()}")
        return proc.stdout


class ActionFailed(Exception):
    """An emulated action failed the way the real one would (the step fails; the run goes on)."""


def truthy_flag(value: Any) -> bool:
    return value is True or (isinstance(value, str) and value.strip().lower() == "true")


def parse_command_file(text: str) -> dict[str, str]:
    """GITHUB_OUTPUT / GITHUB_ENV: `key=value` lines and `key<<DELIM` ... `DELIM` blocks."""
    values: dict[str, str] = {}
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line.strip():
            continue
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            key, delimiter = line.split("<<", 1)
            body: list[str] = []
            while i < len(lines) and lines[i] != delimiter:
                body.append(lines[i])
                i += 1
            if i >= len(lines):
                raise WorkflowError(f"Matching delimiter not found '{delimiter}'")
            i += 1
            values[key] = "\n".join(body)
        elif "=" in line:
            key, value = line.split("=", 1)
            values[key] = value
        else:
            raise WorkflowError(f"Invalid format '{line}'")
    return values


_GLOB_CHARS = re.compile(r"[*?\[]")


def find_upload_files(workspace: Path, spec: str, include_hidden: bool) -> tuple[list[Path], Path]:
    """upload-artifact's search: files for the path lines, and the root their artifact paths start from."""
    includes, excludes = [], []
    for raw in spec.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        (excludes if line.startswith("!") else includes).append(line.lstrip("!"))
    found: dict[Path, None] = {}
    search_paths: list[Path] = []
    for pattern in includes:
        absolute = workspace / pattern
        if _GLOB_CHARS.search(pattern):
            prefix = Path(*[part for part in itertools.takewhile(lambda p: not _GLOB_CHARS.search(p),
                                                                 Path(pattern).parts)])
            search_paths.append((workspace / prefix).resolve())
            candidates = [Path(p) for p in glob.glob(str(absolute), recursive=True)]
        else:
            search_paths.append(absolute.resolve())
            candidates = [absolute]
        for candidate in candidates:
            if candidate.is_dir():
                for path in sorted(candidate.rglob("*")):
                    if path.is_file():
                        found[path.resolve()] = None
            elif candidate.is_file():
                found[candidate.resolve()] = None
    def excluded(path: Path) -> bool:
        rel = path.relative_to(workspace.resolve()).as_posix()
        return any(fnmatch.fnmatch(rel, ex.rstrip("/")) or rel.startswith(ex.rstrip("/") + "/") for ex in excludes)

    files = [p for p in found if not excluded(p)]
    if len(search_paths) > 1:
        root = Path(os.path.commonpath([str(p) for p in search_paths]))
    elif len(files) == 1 and search_paths and files[0] == search_paths[0]:
        root = files[0].parent
    else:
        root = search_paths[0] if search_paths else workspace.resolve()
    if not include_hidden:
        files = [p for p in files if not any(part.startswith(".") for part in p.relative_to(root).parts)]
    return sorted(files), root
