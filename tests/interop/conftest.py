"""A real, independently written OpenAI-compatible server: llama-cpp-python's, with SmolLM2-135M-Instruct.

`make interop` builds its own virtual environment (`.venv-interop`, llama-cpp-python compiled from
source) and model file, then runs these tests with `INTEROP_PYTHON` (that environment's interpreter) and
`INTEROP_MODEL` (the `.gguf`) set. Without them the tests are skipped with that instruction: the plain
suite (`make test`) does not build llama.cpp.

The server's defaults were read before use (llama_cpp/server/settings.py): it listens on `localhost`
port 8000 with no key and a 2048-token context. Here it is bound to 127.0.0.1 on a free port, requires a
key (so the product's Authorization header is exercised), gets an 8192-token context (the model's own)
and the `chatml-function-calling` chat format (SmolLM2 speaks ChatML; this handler turns tool requests
into tool calls), so a leg goes through the full tool loop: assistant tool-call turns sent back.
"""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx2
import pytest

MODEL_ALIAS = "smollm2/smollm2-135m-instruct"
STARTUP_S = 300


@dataclass(frozen=True)
class LlamaServer:
    base_url: str  # what OPENAI_BASE_URL is set to
    key: str
    log: Path

    def chat_statuses(self) -> list[int]:
        """HTTP status of every chat completion the server answered (from its access log)."""
        statuses = []
        for line in self.log.read_text(encoding="utf-8", errors="replace").splitlines():
            if '"POST /v1/chat/completions HTTP/1.1"' in line:
                statuses.append(int(line.rsplit('HTTP/1.1"', 1)[1].split()[0]))
        return statuses


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    python, model = os.environ.get("INTEROP_PYTHON"), os.environ.get("INTEROP_MODEL")
    if not python or not model:
        pytest.skip("the interop server is not built here: run `make interop`")
    assert Path(python).exists() and Path(model).exists(), (python, model)
    port, key = _free_port(), "sk-local-" + secrets.token_hex(8)
    log = tmp_path_factory.mktemp("llama") / "server.log"
    command = [python, "-m", "llama_cpp.server", "--model", model, "--model_alias", MODEL_ALIAS,
               "--host", "127.0.0.1", "--port", str(port), "--api_key", key, "--n_ctx", "8192",
               "--chat_format", "chatml-function-calling", "--seed", "7"]
    with log.open("wb") as sink:
        server = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT)
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + STARTUP_S
        while True:
            assert server.poll() is None, log.read_text(encoding="utf-8", errors="replace")[-3000:]
            try:
                if httpx2.get(base_url + "/models", headers={"Authorization": f"Bearer {key}"}, timeout=5).is_success:
                    break
            except httpx2.HTTPError:
                pass
            assert time.monotonic() < deadline, "the llama-cpp-python server did not start"
            time.sleep(0.5)
        yield LlamaServer(base_url=base_url, key=key, log=log)
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=20)
