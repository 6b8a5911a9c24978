"""`environment`: every key and base URL is checked the same way, before any request."""

from __future__ import annotations

import pytest

from research_dispatch.config import environment
from research_dispatch.core.errors import BadInput, ExitCode, MissingKey


def test_missing_key_names_the_variable() -> None:
    with pytest.raises(MissingKey) as caught:
        environment.require({}, environment.TAVILY)
    assert "TAVILY_API_KEY" in str(caught.value) and caught.value.exit_code == ExitCode.BAD_INPUT


@pytest.mark.parametrize("value", ["sk-or-abc\n", "sk or abc", "\tsk-or-abc", "sk-or-\x00abc", "sk-or-abc\r"])
def test_key_with_whitespace_or_control_character_is_refused(value: str) -> None:
    with pytest.raises(BadInput) as caught:
        environment.require({"OPENROUTER_API_KEY": value}, environment.OPENROUTER)
    message = str(caught.value)
    assert message.startswith("environment: OPENROUTER_API_KEY:") and value.strip() not in message


@pytest.mark.parametrize("url", ["http://127.0.0.1:8080/api/v1", "http://localhost:9", "http://[::1]:7/v1",
                                 "https://openrouter.example/api/v1/", "http://127.0.0.2:1"])
def test_https_or_loopback_http_is_accepted(url: str) -> None:
    creds = environment.require({"OPENROUTER_API_KEY": "sk-or-test", "OPENROUTER_BASE_URL": url},
                                environment.OPENROUTER)
    assert creds.base_url == url.rstrip("/")


@pytest.mark.parametrize("url", ["http://10.0.0.5:8080/api/v1", "http://gateway.internal/v1", "ftp://x/y",
                                 "https://user:pw@host/v1", "not a url", "https://host/v1?x=1", "http://:80/"])
def test_cleartext_or_odd_base_url_is_refused(url: str) -> None:
    with pytest.raises(BadInput) as caught:
        environment.require({"TAVILY_API_KEY": "tvly-test", "TAVILY_BASE_URL": url}, environment.TAVILY)
    assert str(caught.value).startswith("environment: TAVILY_BASE_URL:")


def test_default_base_url_and_required_one() -> None:
    assert environment.require({"EXA_API_KEY": "exa-key-1"}, environment.EXA).base_url.startswith("https://")
    with pytest.raises(BadInput, match="OPENAI_BASE_URL"):
        environment.require({"OPENAI_API_KEY": "sk-local"}, environment.OPENAI_COMPATIBLE)
