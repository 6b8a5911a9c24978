"""Secrets: canary keys for all three services never leave the process in anything we write or send.

Each case runs legs with the canary keys from `tests/conftest.py` (the GitHub token too, though a leg
never needs it), on the ok path and on failure paths whose error messages *echo the key back* (as some
APIs do), and then searches every file under the repository, the command's output, every log record,
every request body and every response the fakes sent. Keys may appear in exactly one place: the
`Authorization` header of requests to their own service.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

import pytest

from tests.clirun import run_cli
from tests.conftest import CANARY
from tests.reliability.conftest import CONTROL, TARGET, configure, on_target, run_legs, view

reliability = pytest.mark.reliability


def canary_env(gateway, tavily) -> dict[str, str]:
    return {**CANARY, "OPENROUTER_BASE_URL": gateway.base_url, "TAVILY_BASE_URL": tavily.base_url}


def texts_of(repo: Path) -> Iterable[tuple[str, bytes]]:
    for path in sorted(repo.rglob("*")):
        if path.is_file():
            yield path.relative_to(repo).as_posix(), path.read_bytes()


def assert_no_canary(sources: Iterable[tuple[str, bytes | str]]) -> int:
    """No canary (nor its bearer header) in any of the named texts; returns how many were searched."""
    count = 0
    for name, data in sources:
        blob = data if isinstance(data, bytes) else data.encode("utf-8", "replace")
        for variable, secret in CANARY.items():
            assert secret.encode() not in blob, f"{variable} leaked into {name}"
        assert b"Bearer " not in blob or name.startswith("request-header"), name
        count += 1
    return count


def assert_wire_is_clean(gateway, tavily) -> None:
    """Each key went only to its own service, only in the Authorization header; no response echoes one."""
    for server, own in ((gateway, CANARY["OPENROUTER_API_KEY"]), (tavily, CANARY["TAVILY_API_KEY"])):
        assert server.requests
        for request, response in server.requests:
            assert request.headers.get("authorization") == f"Bearer {own}"
            others = {k: v for k, v in request.headers.items() if k != "authorization"}
            assert_no_canary([(f"request-body {request.path}", request.body), (f"headers {request.path}", repr(others)),
                              (f"response {request.path}", response.body)])


CLIENT_LOGGERS = ("openai", "httpx2", "httpcore2", "urllib3", "filelock", "tavily", "github", "mcp")


@contextlib.contextmanager
def client_debug_logs(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[logging.LogRecord]]:
    """Every DEBUG record of the client libraries, taken at their own loggers: the check must not depend on
    what earlier tests in this worker did to the root logger's handlers or to a logger's level."""
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Keep(logging.DEBUG)
    monkeypatch.setattr(logging.root.manager, "disable", logging.NOTSET)
    loggers = [logging.getLogger(name) for name in CLIENT_LOGGERS]
    for logger in loggers:
        monkeypatch.setattr(logger, "disabled", False)
        monkeypatch.setattr(logger, "level", logging.DEBUG)
        logger.addHandler(handler)
    logging.root.manager._clear_cache()  # type: ignore[attr-defined]  # levels are cached per logger
    try:
        yield records
    finally:
        for logger in loggers:
            logger.removeHandler(handler)
        logging.root.manager._clear_cache()  # type: ignore[attr-defined]


def assert_repo_is_clean(repo: Path, *extra: tuple[str, str]) -> None:
    searched = assert_no_canary([*texts_of(repo), *extra])
    assert searched >= 4  # at least a report or status, the call log and the trace were searched


@reliability(area="secrets", case="ok path: a full leg",
             expect="no canary in any file (report, call log, status, trace), the output, any DEBUG log record, "
                    "any request body or any response; each key only in its own service's Authorization header")
def test_ok_leg_leaks_nothing(repo, gateway, tavily, caplog, monkeypatch) -> None:
    configure(repo)
    caplog.set_level(logging.DEBUG)
    with client_debug_logs(monkeypatch) as records:
        result = run_cli("research", f"{TARGET.topic},{CONTROL.topic}", "--repo", str(repo),
                         env={**os.environ, **canary_env(gateway, tavily)})
    assert result.code == 0, result.output
    assert view(repo, TARGET).status["status"] == "ok"
    assert records  # the clients did log at DEBUG
    logs = "\n".join(f"{r.name} {r.getMessage()} {r.args!r}" for r in records) + caplog.text
    assert_repo_is_clean(repo, ("output", result.stdout + result.stderr), ("logs", logs))
    assert_wire_is_clean(gateway, tavily)


@reliability(area="secrets", case="401 and 402 whose messages echo the gateway key",
             expect="the leg fails; the key is [REDACTED] in the status file, trace and output; nothing else leaks")
@pytest.mark.parametrize("status", [401, 402])
def test_gateway_error_echoing_the_key(repo, gateway, tavily, status: int) -> None:
    configure(repo)
    gateway.set_scenario({"rules": [on_target(status=status,
                                              message=f"Invalid key {CANARY['OPENROUTER_API_KEY']} for this account")]})
    result = run_cli("research", f"{TARGET.topic},{CONTROL.topic}", "--repo", str(repo),
                     env={**os.environ, **canary_env(gateway, tavily)})
    assert result.code == 1
    target = view(repo, TARGET)
    assert target.status["status"] == "failed"
    assert target.status["error"].startswith(f"gateway HTTP {status}: Invalid key [REDACTED] for this account")
    assert "[REDACTED]" in result.stdout
    assert_repo_is_clean(repo, ("output", result.stdout + result.stderr))


@reliability(area="secrets", case="search plan-limit message echoing the Tavily key",
             expect="the key is [REDACTED] in the reasons, trace and tool messages the model saw")
def test_search_error_echoing_the_key(repo, gateway, tavily) -> None:
    configure(repo)
    tavily.set_scenario({"rules": [{"status": 432, "message": f"plan exceeded for {CANARY['TAVILY_API_KEY']}"}]})
    run_legs(repo, canary_env(gateway, tavily), [TARGET])
    assert view(repo, TARGET).status["status"] == "failed"
    model_saw = [(f"gateway request {i}", r.body) for i, (r, _) in enumerate(gateway.requests)]
    assert_repo_is_clean(repo, *model_saw)


@reliability(area="secrets", case="a usage field carrying the key instead of a number",
             expect="the leg fails with a typed error naming the field (unusable usage, never a bare ValueError) "
                    "and the key [REDACTED]; the other leg ok")
def test_crash_with_the_key_in_the_exception(repo, gateway, tavily) -> None:
    configure(repo)
    key_as_a_count = {"prompt_tokens": CANARY["OPENROUTER_API_KEY"]}
    gateway.set_scenario({"rules": [on_target(on_call=2, usage_fields=key_as_a_count)]})
    run_legs(repo, canary_env(gateway, tavily))
    target = view(repo, TARGET)
    assert target.status["status"] == "failed"
    assert "unusable usage.prompt_tokens" in target.status["error"] and "[REDACTED]" in target.status["error"]
    assert view(repo, CONTROL).status["status"] == "ok"
    assert_repo_is_clean(repo)


@reliability(area="secrets", case="keys passed in an env mapping, not os.environ",
             expect="still redacted: a 401 echoing the key leaves no trace of it in any file")
def test_keys_only_in_the_env_mapping(repo, gateway, tavily) -> None:
    configure(repo)
    key = "sk-or-mapping-only-5f3e2d1c0b9a"  # used by no other test: redaction cannot come from an earlier one
    env: Mapping[str, str] = {**canary_env(gateway, tavily), "OPENROUTER_API_KEY": key}
    assert key not in os.environ.values()
    gateway.set_scenario({"rules": [on_target(status=401, message=f"bad key {key}")]})
    run_legs(repo, env)
    assert view(repo, TARGET).status["error"].startswith("gateway HTTP 401: bad key [REDACTED]")
    for name, data in texts_of(repo):
        assert key.encode() not in data, name
    assert_repo_is_clean(repo)
