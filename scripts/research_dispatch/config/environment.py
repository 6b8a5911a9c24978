"""Service credentials and endpoints from the environment, checked before any request.

One place reads every key and base URL, so every service gets the same rules:

* a key must be set (a missing key is a `MissingKey`, exit 2, before any network call: Tavily's client
  would otherwise silently go keyless) and must be one token: whitespace or a control character (a
  pasted newline, a stray quote-space) can never authenticate, so it is refused up front naming the
  variable instead of being retried or turning into confusing downstream errors;
* a base URL must be `https://`, or plain `http://` only to a loopback address (the fakes, a local
  gateway): a key sent in clear across a network is refused; no user:password part, no fragment;
* every accepted key is registered with `redact`, so whoever reads it makes sure it never shows.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from research_dispatch.core.errors import BadInput, MissingKey, MissingKeys
from research_dispatch.core.redact import register_secrets

LOOPBACK_HOSTS = frozenset({"localhost"})


@dataclass(frozen=True)
class Service:
    """An external service: where its key and base URL come from, and what it is for."""

    name: str
    key_variable: str
    url_variable: str
    default_url: str | None  # None: the base URL is required
    purpose: str
    where: str = ""  # where a person gets the key (README: Keys)


OPENROUTER = Service("OpenRouter", "OPENROUTER_API_KEY", "OPENROUTER_BASE_URL", "https://openrouter.ai/api/v1",
                     "call the model gateway", "create one on the Keys page of your OpenRouter account")
OPENAI_COMPATIBLE = Service("OpenAI-compatible gateway", "OPENAI_API_KEY", "OPENAI_BASE_URL", None,
                            "call the OpenAI-compatible model gateway", "the key your gateway was started with")
TAVILY = Service("Tavily", "TAVILY_API_KEY", "TAVILY_BASE_URL", "https://api.tavily.com", "search the web",
                 "it is on the Tavily dashboard, under API Keys")
EXA = Service("Exa", "EXA_API_KEY", "EXA_BASE_URL", "https://api.exa.ai", "search the web with Exa",
              "create one on the API Keys page of the Exa dashboard")
GITHUB = Service("GitHub", "GITHUB_TOKEN", "GITHUB_API_URL", "https://api.github.com",
                 "create or update the pull request (or pass --no-pr)",
                 "a GitHub App installation token, or the workflow's GITHUB_TOKEN")


@dataclass(frozen=True)
class Credentials:
    """A checked key and base URL for one service (the base URL has no trailing slash)."""

    service: Service
    key: str
    base_url: str


def is_loopback(host: str) -> bool:
    host = host.strip("[]").lower()
    if host in LOOPBACK_HOSTS:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_key(env: Mapping[str, str], variable: str, purpose: str, where: str = "") -> str:
    """The key in `variable`, or a one-line `BadInput` naming the variable."""
    value = env.get(variable, "")
    if not value:
        raise MissingKey(variable, purpose, where or None)
    if any(ch.isspace() or ord(ch) < 32 or ord(ch) == 127 for ch in value):
        raise BadInput("contains whitespace or a control character (a pasted newline?); a key is one token",
                       path="environment", field=variable)
    register_secrets([value])
    return value


def check_base_url(env: Mapping[str, str], variable: str, default: str | None) -> str:
    """The base URL in `variable` (or the default): https, or http to a loopback address only."""
    raw = env.get(variable, "").strip()
    if not raw:
        if default is None:
            raise BadInput("is not set; it is required (the gateway's base URL, e.g. http://127.0.0.1:4000/v1)",
                           path="environment", field=variable)
        return default
    try:
        parts = urlsplit(raw)
        host = parts.hostname or ""
        _ = parts.port  # raises ValueError for a malformed port
    except ValueError:
        raise BadInput(f"{raw[:100]!r} is not a URL", path="environment", field=variable) from None
    if parts.scheme not in ("http", "https") or not host:
        raise BadInput(f"{raw[:100]!r} is not an http(s) URL", path="environment", field=variable)
    if parts.username is not None or parts.password is not None:
        raise BadInput("must not carry a user name or password; keys come from their own variables",
                       path="environment", field=variable)
    if parts.fragment or parts.query:
        raise BadInput("must not have a query or fragment", path="environment", field=variable)
    if parts.scheme == "http" and not is_loopback(host):
        raise BadInput("plain http is allowed only to a loopback address (the key would travel in clear); "
                       "use https", path="environment", field=variable)
    return raw.rstrip("/")


def require(env: Mapping[str, str], service: Service) -> Credentials:
    """Key and base URL of `service`, both checked; nothing has been sent anywhere yet."""
    key = check_key(env, service.key_variable, service.purpose, service.where)
    return Credentials(service=service, key=key,
                       base_url=check_base_url(env, service.url_variable, service.default_url))


def require_all(env: Mapping[str, str], services: Sequence[Service]) -> list[Credentials]:
    """Every service's key and base URL; keys that are not set are all named in one `MissingKeys`."""
    found: list[Credentials] = []
    missing: list[MissingKey] = []
    for service in services:
        try:
            found.append(require(env, service))
        except MissingKey as exc:
            missing.append(exc)
    if len(missing) == 1:
        raise missing[0]
    if missing:
        raise MissingKeys(missing)
    return found
