"""Escape sequences in file names and untrusted text never reach the terminal through `collect` and `check`.

A file name is untrusted: an artifact folder (`collect`) and the topics folder (`check`) may hold names
carrying OSC 52 (`ESC ] 52 ; c ; <base64> BEL`, which sets the reader's clipboard in many terminals), CSI
sequences (`ESC [ 2 J` clears the screen; `\\x9b` is the one-byte CSI of the C1 set) and bidi overrides.
Each command is run through click's `CliRunner` (tests/clirun.py: what reaches the terminal is what it
prints); every byte of its stdout and stderr is checked.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from research_dispatch.gateway.provenance import CallRecord
from tests.clirun import CliRun, run_cli
from tests.conftest import write_topic

reliability = pytest.mark.reliability
OSC52 = "\x1b]52;c;ZWNobyBvd25lZA==\x07"
CSI = "\x1b[2J\x1b[1;1H"
C1_CSI = "\x9b31m"
BIDI = "\u202eexe.txt\u202c"
HOSTILE = f"evil{OSC52}{CSI}{C1_CSI}{BIDI}"
# What a terminal may act on: C0 controls but tab and newline, DEL, the C1 set, bidi controls.
RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def printed(result: CliRun) -> str:
    return result.stdout + result.stderr


@reliability(area="hostile", case="`collect`: an artifact holds a stray file whose name carries OSC 52, CSI (7- and "
                                  "8-bit) and a bidi override",
             expect="the file is ignored and named, its escape sequences shown as text (`\\x1b]52;…`, `\\x9b`, "
                    "`\\u202e`); no control character reaches the terminal")
def test_collect_shows_escape_sequences_in_file_names_as_text(repo: Path, tmp_path: Path) -> None:
    incoming = tmp_path / "artifact" / "research"
    incoming.mkdir(parents=True)
    (incoming / f"{HOSTILE}.md").write_text("stray", encoding="utf-8")
    result = run_cli("collect", str(incoming.parent), "--repo", str(repo))
    assert result.code == 0, printed(result)
    out = printed(result)
    assert RAW_CONTROL.findall(out) == [], repr(out)
    assert "ignored: research/evil\\x1b]52;c;ZWNobyBvd25lZA==\\x07\\x1b[2J" in out and "\\x9b31m\\u202e" in out


@reliability(area="hostile", case="`collect`: a leg's call log whose requested model carries OSC 52, CSI (7- and "
                                  "8-bit) and a bidi override",
             expect="the call log is rejected naming the line and the model it requested; the sequences in the reason "
                    "are shown as text, none reaches the terminal")
def test_collect_shows_escape_sequences_in_a_rejection_reason_as_text(repo: Path, tmp_path: Path) -> None:
    research = tmp_path / "artifact" / "research"
    research.mkdir(parents=True)
    record = CallRecord(generation_id="gen-1", requested_model=HOSTILE, requested_provider=None,
                        served_model="deepseek/deepseek-v4-pro", served_provider="DeepSeek", metadata_present=True,
                        attempt=1, attempts_recorded=1, strategy=None, cached=False, finish_reason="stop",
                        native_finish_reason=None, prompt_tokens=10, completion_tokens=5, cached_tokens=0,
                        reasoning_tokens=0, cost_usd=0.01, latency_s=1.5, retries=0, purpose="research",
                        verdict="exact")
    (research / "02-diloco-family.calls.jsonl").write_text(record.to_json() + "\n", encoding="utf-8")
    result = run_cli("collect", str(research.parent), "--repo", str(repo))
    out = printed(result)
    assert result.code == 1, out
    assert "rejected: research/02-diloco-family.calls.jsonl: line 1 requested evil\\x1b]52;c;" in out, out
    assert RAW_CONTROL.findall(out) == [], repr(out)


@reliability(area="hostile", case="`check` (and `check --json`): a topic file whose name and field values carry OSC "
                                  "52, CSI (7- and 8-bit) and a bidi override",
             expect="exit 2 with one line naming the file and the field; the sequences are shown as text (`\\x1b`, "
                    "`\\x9b`, `\\u202e`) and the JSON document escapes them (`\\u001b`, `\\u009b`, `\\u202e`); no "
                    "control character reaches the terminal")
@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_check_shows_escape_sequences_in_topic_files_as_text(repo: Path, as_json: bool) -> None:
    write_topic(repo, f"99-{HOSTILE}.yaml", f"id: \"{HOSTILE}\"\ntitle: x\nscope: y\nmodels: []\n")
    result = run_cli("check", "--repo", str(repo), *(["--json"] if as_json else []))
    out = printed(result)
    assert result.code == 2, out
    assert RAW_CONTROL.findall(out) == [], repr(out)
    assert "topics/99-evil\\x1b]52;c;" in out if not as_json else "99-evil\\u001b]52;c;" in result.stdout
    if as_json:
        document = json.loads(result.stdout)
        # the JSON value is the name itself
        assert any(HOSTILE in (problem["file"] or "") for problem in document["problems"])
