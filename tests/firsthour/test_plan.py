"""`plan` for people (issue 24): on a terminal a table with the caps, the worst case and an estimate;
piped or with `--json` the matrix JSON exactly as before (FIXED). Run as a user does; on a terminal in a
fresh process whose terminal is a real pseudo-terminal, so the command decides by itself that it talks to
a person (piped: in process, tests/clirun.py).
"""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

from tests.bounds.conftest import child_env, command
from tests.clirun import run_cli
from tests.conftest import ROOT

STEMS = ("01-composer-2.5", "02-diloco-family", "03-monarch-torchforge-openenv", "04-verl-trl",
         "05-trace-replay-distillation")


def on_a_terminal(*args: str, env: dict[str, str], cwd: Path, timeout: float = 120) -> tuple[int, str]:
    """The command with its stdout and stderr on a pseudo-terminal; (exit code, what it printed)."""
    main, child = pty.openpty()
    process = subprocess.Popen(command(*args), env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=child,
                               stderr=child, close_fds=True)
    os.close(child)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([main], [], [], 0.1)
        if ready:
            try:
                data = os.read(main, 65536)
            except OSError:  # the child closed its end
                break
            if not data:
                break
            chunks.append(data)
        elif process.poll() is not None:
            break
    os.close(main)
    code = process.wait(timeout=30)
    return code, b"".join(chunks).decode("utf-8").replace("\r\n", "\n")


def test_plan_on_a_terminal_is_a_table_with_the_worst_case_and_an_estimate() -> None:
    code, text = on_a_terminal("plan", env=child_env({"COLUMNS": "80"}), cwd=ROOT)
    assert code == 0, text
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80, [line for line in lines if len(line) > 80]
    # Issue 30.8: at 80 columns the leg ids give way first (by their middle, staying apart), so the
    # model slugs keep their room: none is cut to `anthropic/cl…`.
    rows = [line.split() for line in lines if line.lstrip()[:3] in {stem[:3] for stem in STEMS}]
    assert sorted(row[0][:3] for row in rows) == [stem[:3] for stem in STEMS], text
    assert all(row[0] == stem or ("…" in row[0] and stem.endswith(row[0].split("…")[-1]))
               for row, stem in zip(sorted(rows), STEMS, strict=True)), text
    for model in ("deepseek/deepseek-v4-pro", "openai/gpt-5", "anthropic/claude-sonnet-4.6", "google/gemini-3.1"):
        assert model in text, (model, text)
    assert "worst case: $15.00 for the legs: their dollar caps ($15.00),\n  bounded by run_budget_usd ($50.00)" in text
    assert "estimate: ~$" in text and "genai-prices" in text
    if sys.version_info >= (3, 11):  # genai-prices is installed: the judge is the one model it does not list
        assert "not in the price list, so not estimated: x-ai/grok-4" in text  # said, not guessed
    else:  # Python 3.10 has no price list: said so, and every model is listed as not estimated
        assert "no price list (genai-prices is not installed" in text and "x-ai/grok-4" in text
    assert '"include"' not in text


def test_plan_piped_or_with_json_prints_the_matrix_as_before() -> None:
    piped = run_cli("plan", env=child_env(), cwd=ROOT)
    assert piped.code == 0 and piped.stderr == ""
    matrix = json.loads(piped.stdout)
    assert [entry["leg"] for entry in matrix["include"]] == list(STEMS)
    code, text = on_a_terminal("plan", "--json", env=child_env(), cwd=ROOT)
    assert code == 0 and json.loads(text) == matrix


def test_the_worst_case_is_bounded_by_the_run_budget(tmp_path: Path) -> None:
    repo = tmp_path / "review"
    (repo / "topics").mkdir(parents=True)
    for stem in STEMS[:2]:
        (repo / "topics" / f"{stem}.yaml").write_text((ROOT / "topics" / f"{stem}.yaml").read_text(encoding="utf-8"),
                                                      encoding="utf-8")
    (repo / "pyproject.toml").write_text("[tool.research-dispatch]\nrun_budget_usd = 4.0\n", encoding="utf-8")
    code, text = on_a_terminal("plan", env=child_env(), cwd=repo)
    assert code == 0, text
    assert "worst case: $4.00 for the legs: their dollar caps ($6.00),\n  bounded by run_budget_usd ($4.00)" in text
