"""Shared fixtures: a throwaway repository with the real topics, and the offline fakes over HTTP.

Every test that touches the network talks to a fake server on 127.0.0.1 through the real client
library; nothing of the product is mocked.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

# tests.skipguard: a skip not listed in tests/skips-allowed.txt fails the session; tests.tierguard: an unmarked
# test over a second fails (the fast tier stays fast); tests.profiles: the hypothesis profile of this session.
pytest_plugins = ["tests.skipguard", "tests.tierguard", "tests.profiles"]

ROOT = Path(__file__).resolve().parent.parent
CANARY = {
    "OPENROUTER_API_KEY": "sk-or-canary-7d1f0c9e5b3a4e21",
    "TAVILY_API_KEY": "tvly-canary-0a9b8c7d6e5f4a3b",
    "GITHUB_TOKEN": "ghs_canary0123456789abcdefABCDEF",
}


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test may see real keys, base URLs or runner files from the machine it runs on."""
    for name in ("OPENROUTER_API_KEY", "OPENROUTER_BASE_URL", "TAVILY_API_KEY", "TAVILY_BASE_URL",
                 "GITHUB_TOKEN", "GH_TOKEN", "GITHUB_REPOSITORY", "GITHUB_API_URL", "GITHUB_OUTPUT",
                 "GITHUB_STEP_SUMMARY", "GITHUB_RUN_ID", "GITHUB_SERVER_URL", "RESEARCH_DISPATCH_CYCLE",
                 "OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_CUSTOM_HEADERS", "TAVILY_HTTP_PROXY",
                 "TAVILY_HTTPS_PROXY", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository with this project's pyproject settings and its five topics."""
    target = tmp_path / "repo"
    target.mkdir()
    shutil.copytree(ROOT / "topics", target / "topics")
    (target / "pyproject.toml").write_text(
        '[tool.research-dispatch]\nframework_name = "composer-replication-framework"\n', encoding="utf-8")
    return target


def write_topic(repo: Path, name: str, content: str | bytes) -> Path:
    path = repo / "topics" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


@pytest.fixture
def single_topic_repo(tmp_path: Path) -> Iterator[Path]:
    target = tmp_path / "single"
    (target / "topics").mkdir(parents=True)
    shutil.copy(ROOT / "topics" / "02-diloco-family.yaml", target / "topics")
    yield target


@pytest.fixture
def gateway() -> Iterator[object]:
    from research_dispatch_fakes.gateway import FakeGateway

    with FakeGateway() as server:
        yield server


@pytest.fixture
def tavily() -> Iterator[object]:
    from research_dispatch_fakes.tavily import FakeTavily

    with FakeTavily() as server:
        yield server


@pytest.fixture
def fake_env(monkeypatch: pytest.MonkeyPatch, gateway: object, tavily: object) -> dict[str, str]:
    """Keys (canaries) and base URLs pointing the real clients at the fakes."""
    env = {
        "OPENROUTER_API_KEY": CANARY["OPENROUTER_API_KEY"],
        "TAVILY_API_KEY": CANARY["TAVILY_API_KEY"],
        "OPENROUTER_BASE_URL": gateway.base_url,  # type: ignore[attr-defined]
        "TAVILY_BASE_URL": tavily.base_url,  # type: ignore[attr-defined]
        "RESEARCH_DISPATCH_CYCLE": "2026-H2",
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return env


def fast_retries(repo: Path, extra: str = "") -> None:
    """Retries without back-off sleeps, so fault tests do not depend on wall time."""
    path = repo / "pyproject.toml"
    text = path.read_text(encoding="utf-8") if path.exists() else "[tool.research-dispatch]\n"
    if "[tool.research-dispatch]" not in text:
        text += "\n[tool.research-dispatch]\n"
    path.write_text(text + "gateway = {backoff_base_s = 0.0, backoff_max_s = 0.0}\n" + extra, encoding="utf-8")
