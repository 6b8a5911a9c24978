"""Records that age well: what release 0.1.0 wrote still loads (tests/data/v0.1.0/NOTE.md).

Call logs and status files are read back from the repository and from CI artifacts long after they
were written, by whatever version runs next. A field added since (the call log's `gateway_kind`,
`is_byok`, `provider_cost_usd`, `gateway_fee_usd`; the status file's `interrupted`, `body_sha256`) takes
its default; a field the old version did write is still required. Each case runs today's CLI (in
process: tests/clirun.py) on a copy of the 0.1.0 files, against the fakes where it needs a gateway.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from research_dispatch.gateway.provenance import CallRecord
from tests.bounds.conftest import child_env, fake_env
from tests.clirun import run_cli
from tests.conftest import ROOT

reliability = pytest.mark.reliability
FIXTURE = ROOT / "tests" / "data" / "v0.1.0"
STEMS = ("01-composer-2.5", "02-diloco-family")
ADDED_SINCE = ("gateway_kind", "is_byok", "provider_cost_usd", "gateway_fee_usd")


def old_repository(tmp_path: Path) -> Path:
    """A git repository holding the 0.1.0 files where that version put them (status files in build/legs)."""
    repo = tmp_path / "repo"
    shutil.copytree(FIXTURE, repo, ignore=shutil.ignore_patterns("legs", "NOTE.md"))
    shutil.copytree(FIXTURE / "legs", repo / "build" / "legs")
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=Test", "-c", "user.email=t@example.invalid", "add",
                    "-A"], check=True)
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=Test", "-c", "user.email=t@example.invalid",
                    "commit", "-q", "-m", "0.1.0 records"], check=True)
    return repo


def test_the_fixture_is_of_the_old_format() -> None:
    """The fixture really lacks what was added since (else the cases below prove nothing)."""
    for stem in STEMS:
        for line in (FIXTURE / "research" / f"{stem}.calls.jsonl").read_text(encoding="utf-8").splitlines():
            assert not set(ADDED_SINCE) & set(json.loads(line)), line
        status = json.loads((FIXTURE / "legs" / f"{stem}.json").read_text(encoding="utf-8"))
        assert "interrupted" not in status and "body_sha256" not in status


def test_a_0_1_0_call_line_loads_with_the_defaults_and_a_field_it_wrote_is_still_required() -> None:
    line = (FIXTURE / "research" / f"{STEMS[0]}.calls.jsonl").read_text(encoding="utf-8").splitlines()[0]
    record = CallRecord.from_json(line)
    assert (record.gateway_kind, record.is_byok, record.provider_cost_usd, record.gateway_fee_usd) == \
        ("openrouter", False, None, None)
    assert record.verdict == "exact" and record.cost_usd > 0
    without_verdict = {k: v for k, v in json.loads(line).items() if k != "verdict"}
    with pytest.raises(ValueError, match="verdict: missing"):
        CallRecord.from_json(json.dumps(without_verdict))


@reliability(area="records", case="`verify` on a call log written by 0.1.0",
             expect="exit 0: every route exact and verified, no problem listed (the fields added since take "
                    "their defaults)")
def test_verify_reads_a_0_1_0_call_log(tmp_path: Path) -> None:
    repo = old_repository(tmp_path)
    done = run_cli("verify", "--repo", str(repo), env=child_env())
    assert done.code == 0, done.output
    rows = [line for line in done.stdout.splitlines()[1:] if not line.startswith("warning:")]
    assert len(rows) == len(STEMS) and all(" exact " in row and "⚠" not in row for row in rows), done.stdout
    assert "problem" not in done.output
    # 0.1.0 wrote no evidence files: said, not refused
    assert done.output.count("the report predates evidence files") == len(STEMS)


@reliability(area="records", case="`synthesize` over reports and call logs written by 0.1.0",
             expect="exit 0: the synthesis, the claims ledger and its call log are written from both reports")
def test_synthesize_reads_0_1_0_reports_and_call_logs(tmp_path: Path, gateway, tavily) -> None:
    repo = old_repository(tmp_path)
    done = run_cli("synthesize", "--repo", str(repo), env=child_env(fake_env(gateway, tavily)))
    assert done.code == 0, done.output
    ledger = json.loads((repo / "framework" / "claims.json").read_text(encoding="utf-8"))
    assert {claim["report"] for claim in ledger["claims"]} == set(STEMS)
    for line in (repo / "framework" / "synthesis.calls.jsonl").read_text(encoding="utf-8").splitlines():
        CallRecord.from_json(line)


@reliability(area="records", case="`run` resuming over status files and reports written by 0.1.0",
             expect="both status files read (none reported damaged); both legs run again, each said with its reason "
                    "(the researcher's prompts changed since 0.1.0: researcher@2), and both write reports")
def test_run_resumes_over_0_1_0_status_files(tmp_path: Path, gateway, tavily) -> None:
    """A 0.1.0 status file is read like a current one; the leg's inputs decide. The researcher's prompts
    are part of a leg's inputs (`leg/execute.input_hash`), and they changed since 0.1.0 (issue 32: plan,
    gap check, a report written from a dossier), so the legs run again and say why."""
    repo = old_repository(tmp_path)
    done = run_cli("run", "--no-publish", "--repo", str(repo), env=child_env(fake_env(gateway, tavily)))
    assert done.code == 0, done.output
    assert f"{len(STEMS)} leg(s) ran, 0 kept, 0 failed" in done.output, done.output
    for stem in STEMS:
        assert f"run  {stem} " in done.output and "inputs changed" in done.output
    assert "damaged" not in done.output and "ignoring" not in done.output
