"""Model calls bounded in time, memory and by Ctrl-C, against hostile gateways written here (raw sockets).

A per-read timeout does not stop a server that dribbles one byte every 0.3 s, and nothing stops a body
that never ends; the gateway's `bounded_http` transport must. The process-level cases run the CLI in a
fresh interpreter, as a user does, against a hostile server on 127.0.0.1; they assert behaviour (the leg
ends, failed, honestly, within its cap; memory stays bounded) with generous limits, and print the
measured figures (`pytest -s` shows them) instead of asserting tight timings.
"""

from __future__ import annotations

import contextlib
import json
import math
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from research_dispatch.config.settings import GatewaySettings
from research_dispatch.core.bounded_http import bounded, bounded_client
from research_dispatch.core.bounds import CallBounds
from research_dispatch.core.errors import (
    CallTimedOut,
    DeadlineReached,
    GatewayCallTimedOut,
    GatewayError,
    GatewayInterrupted,
    GatewayResponseTooLarge,
)
from research_dispatch.core.retry import RetryPolicy
from research_dispatch.gateway.client import Gateway
from tests.conftest import CANARY
from tests.reliability.conftest import TARGET, configure, run_legs, set_topic_budget, view

reliability = pytest.mark.reliability
USER = [{"role": "user", "content": "hello"}]
DRIBBLE_S = 0.3
RSS_LIMIT_MB = 400


class HostileGateway:
    """A TCP server that reads each HTTP request, then misbehaves in one of three ways:

    * `slowloris`: the whole response, status line and headers included, one byte every 0.3 s;
    * `endless`: a chunked 200 response whose body never ends (64 KiB chunks as fast as they go);
    * `silent`: never answers.
    """

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.stop = threading.Event()
        self.requests: list[bytes] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.2)
        self._thread = threading.Thread(target=self._serve, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._listener.getsockname()[1]}/api/v1"

    def __enter__(self) -> HostileGateway:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self._thread.join(timeout=5)
        self._listener.close()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except OSError:
                continue
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _read_request(self, conn: socket.socket) -> None:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                return
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                       if line.lower().startswith(b"content-length:")), 0)
        while len(body) < length:
            chunk = conn.recv(65536)
            if not chunk:
                break
            body += chunk
        self.requests.append(head.split(b"\r\n", 1)[0])

    def _handle(self, conn: socket.socket) -> None:
        with contextlib.suppress(OSError), conn:
            conn.settimeout(60)
            self._read_request(conn)
            if self.mode == "slowloris":
                body = json.dumps({"data": {"endpoints": []}, "padding": "x" * 4000}).encode()
                response = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                            + str(len(body)).encode() + b"\r\n\r\n" + body)
                for byte in response:
                    if self.stop.wait(DRIBBLE_S):
                        return
                    conn.sendall(bytes([byte]))
            elif self.mode == "endless":
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
                chunk = b"%x\r\n%s\r\n" % (65536, b" " * 65536)
                while not self.stop.is_set():
                    conn.sendall(chunk)
            else:
                self.stop.wait(120)


def gateway_for(server: HostileGateway, interrupt: threading.Event | None = None, **kw: Any) -> Gateway:
    return Gateway(api_key="sk-or-hostile", base_url=server.base_url, settings=GatewaySettings(**kw),
                   retry=RetryPolicy(max_retries=0, sleep=lambda _s: None), interrupt=interrupt)


# ---------------------------------------------------------------------------------------------
# in-process: the bounds themselves
# ---------------------------------------------------------------------------------------------
def test_the_default_client_bounds_socket_reads() -> None:
    """The read bounds are the transport's own (httpcore2's public `network_backend`), not a patch of a
    library's private attribute: a silent server, a client whose per-read timeout is 30 s, a call bounded
    to 0.3 s — the call ends at the bound, from inside the blocked read."""
    with HostileGateway("silent") as server, bounded_client(timeout=30.0) as client:
        with pytest.raises(CallTimedOut), bounded(CallBounds.within(0.3), "probe"):
            client.get(server.base_url + "/models")
        assert server.requests  # the request was sent: the bound cut the wait for the answer


@pytest.mark.slow
@reliability(area="gateway", case="slow-loris gateway: one byte every 0.3 s, headers included",
             expect="the call ends at its wall-clock deadline (GatewayCallTimedOut, not retried past the leg's "
                    "deadline), although no single read ever times out")
def test_dribbling_server_is_cut_at_the_deadline() -> None:
    with HostileGateway("slowloris") as server, gateway_for(server) as gw:
        started = time.monotonic()
        with pytest.raises(GatewayCallTimedOut) as timed_out:
            gw.complete(model="deepseek/deepseek-v4-pro", messages=USER, deadline=time.monotonic() + 2.0)
        elapsed = time.monotonic() - started
    assert not timed_out.value.retryable  # the leg's time is spent
    assert isinstance(timed_out.value, DeadlineReached)  # the caller's cap, not gateway.timeout_s
    assert elapsed < 60  # the full response would take ~20 minutes at this pace


@reliability(area="gateway", case="never-ending response body (in process)",
             expect="reading stops at the 8 MiB response cap: GatewayResponseTooLarge, never retried")
def test_endless_body_is_cut_at_the_size_cap() -> None:
    with HostileGateway("endless") as server, gateway_for(server) as gw, \
            pytest.raises(GatewayResponseTooLarge, match="larger than"):
        gw.complete(model="deepseek/deepseek-v4-pro", messages=USER)


@pytest.mark.slow
@reliability(area="gateway", case="Ctrl-C while a gateway call waits on a silent server",
             expect="the call stops within a fraction of a second of the interrupt (GatewayInterrupted), "
                    "between socket reads, not after the read timeout")
def test_interrupt_stops_a_silent_call() -> None:
    interrupt = threading.Event()
    with HostileGateway("silent") as server, gateway_for(server, interrupt=interrupt) as gw:
        threading.Timer(0.5, interrupt.set).start()
        started = time.monotonic()
        with pytest.raises(GatewayInterrupted):
            gw.complete(model="deepseek/deepseek-v4-pro", messages=USER)
        assert time.monotonic() - started < 60  # the configured read timeout is 180 s


@pytest.mark.slow
def test_a_quiet_call_without_a_leg_deadline_is_an_ordinary_retryable_timeout() -> None:
    """`timeout_s` bounds the whole call; with time left in the leg the timeout is worth another attempt."""
    with HostileGateway("silent") as server, gateway_for(server, timeout_s=1.0) as gw, \
            pytest.raises(GatewayError, match=r"timed out|deadline") as caught:
        gw.complete(model="deepseek/deepseek-v4-pro", messages=USER)
    assert caught.value.retryable and caught.value.error_type == "timeout"
    assert not isinstance(caught.value, DeadlineReached) and "(gateway.timeout_s = 1 s)" in str(caught.value)


@reliability(area="gateway", case="usage.cost NaN, negative or not a number",
             expect="UnusableUsage, a typed gateway error naming the field (never a bare ValueError): the leg "
                    "fails saying its dollar cap cannot be enforced")
@pytest.mark.parametrize("cost", ["NaN", -1.0, "free"])
def test_unusable_cost_fails_the_leg_honestly(repo: Path, fake_env: dict[str, str], gateway: Any, cost: Any) -> None:
    configure(repo)
    gateway.set_scenario({"rules": [{"on_call": 2, "usage_cost": cost}]})
    run_legs(repo, fake_env, [TARGET])
    leg = view(repo, TARGET)
    assert leg.status["status"] == "failed"
    assert "unusable usage.cost" in leg.status["error"] and "dollar cap cannot be enforced" in leg.status["error"]
    assert leg.reasons != ["internal error; see the trace"]


@reliability(area="budget", case="long-context price override",
             expect="the pre-call bound prices the prompt at the override that applies: the leg never spends past "
                    "max_cost_usd although prices jump tenfold past 1000 prompt tokens")
def test_dollar_cap_holds_under_long_context_override(repo: Path, fake_env: dict[str, str], gateway: Any) -> None:
    configure(repo)
    # enough for some research at these prices (a report at the band maximum costs about $5 past the
    # threshold): too little, and no call starts at all (research that could not be written up is not begun)
    set_topic_budget(repo, TARGET, "{max_cost_usd: 8.0}")
    gateway.set_scenario({"script": {"searches": 6, "per_turn": 1, "reads": 3}, "pricing": {"*": {
        "prompt": 10.0, "completion": 40.0,
        "overrides": [{"min_prompt_tokens": 1000, "prompt": 100.0, "completion": 400.0}]}}})
    run_legs(repo, fake_env, [TARGET])
    leg = view(repo, TARGET)
    assert sum(call["cost_usd"] for call in leg.calls) <= leg.status["cost_usd"] <= 8.0  # search spend included
    assert any(c["usage"]["prompt_tokens"] > 1000 for c in gateway.completions if c["usage"])
    assert leg.status["status"] == "degraded" and leg.reasons[0].startswith("dollar budget")


# ---------------------------------------------------------------------------------------------
# process level: the CLI in a fresh interpreter against a hostile gateway
# ---------------------------------------------------------------------------------------------
MEASURE = textwrap.dedent("""
    import json, resource, subprocess, sys, time
    started = time.monotonic()
    done = subprocess.run(sys.argv[1:], capture_output=True, text=True)
    print(json.dumps({"code": done.returncode, "seconds": time.monotonic() - started,
                      "peak_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
                      "stdout": done.stdout, "stderr": done.stderr}))
""")


def research_in_a_fresh_process(repo: Path, server: HostileGateway, tavily: Any) -> dict[str, Any]:
    """`research-dispatch research diloco-family` in its own interpreter, with its wall time and peak RSS."""
    env = {"PATH": "/usr/bin:/bin", "HOME": str(repo), "NO_PROXY": "127.0.0.1,localhost",
           "OPENROUTER_API_KEY": CANARY["OPENROUTER_API_KEY"], "OPENROUTER_BASE_URL": server.base_url,
           "TAVILY_API_KEY": CANARY["TAVILY_API_KEY"], "TAVILY_BASE_URL": tavily.base_url,
           "RESEARCH_DISPATCH_CYCLE": "2026-H2"}
    command = [sys.executable, "-c", MEASURE, sys.executable, "-m", "research_dispatch", "research",
               TARGET.topic, "--repo", str(repo)]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    return dict(json.loads(done.stdout))


@pytest.fixture
def measured(request: pytest.FixtureRequest) -> Iterator[dict[str, Any]]:
    figures: dict[str, Any] = {}
    yield figures
    if figures:
        print(f"\n{request.node.name}: " + ", ".join(f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}"
                                                     for k, v in figures.items()))


@pytest.mark.e2e
@reliability(area="gateway", case="slow-loris gateway against a leg with timeout_minutes: 0.25 (fresh process)",
             expect="`research` ends near the leg's 15 s cap with exit 1, the leg failed naming its deadline, no "
                    "traceback")
def test_slowloris_gateway_ends_the_leg_at_its_cap(repo: Path, tavily: Any, measured: dict[str, Any]) -> None:
    configure(repo)
    set_topic_budget(repo, TARGET, "{timeout_minutes: 0.25}")
    with HostileGateway("slowloris") as server:
        result = research_in_a_fresh_process(repo, server, tavily)
    measured.update(seconds=result["seconds"], peak_rss_mb=result["peak_rss_mb"])
    assert result["code"] == 1, result
    assert "Traceback" not in result["stderr"]
    leg = view(repo, TARGET)
    assert leg.status["status"] == "failed", leg.status
    assert "deadline" in leg.status["error"] or "time cap" in leg.status["error"], leg.status
    assert 15 <= result["seconds"] < 15 + 90  # the cap, plus start-up; never the ~20 min the server would take


@pytest.mark.slow
@reliability(area="gateway", case="never-ending chunked body (fresh process)",
             expect=f"memory stays bounded (peak RSS under {RSS_LIMIT_MB} MB): reading stops at the 8 MiB cap; the "
                    "leg fails naming the oversized response; exit 1, no traceback")
def test_endless_body_keeps_memory_bounded(repo: Path, tavily: Any, measured: dict[str, Any]) -> None:
    configure(repo)
    with HostileGateway("endless") as server:
        result = research_in_a_fresh_process(repo, server, tavily)
    measured.update(seconds=result["seconds"], peak_rss_mb=result["peak_rss_mb"])
    assert result["code"] == 1, result
    assert "Traceback" not in result["stderr"]
    assert result["peak_rss_mb"] < RSS_LIMIT_MB
    leg = view(repo, TARGET)
    assert leg.status["status"] == "failed" and "larger than" in (leg.status["error"] or ""), leg.status
    assert not math.isnan(result["seconds"])
