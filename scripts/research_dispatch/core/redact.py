"""Keep API keys out of everything we write.

Keys are never put into files, logs, traces or PR bodies on purpose; this module is the second line:
every text the product persists or prints passes through `redact`, which replaces the current values
of the key variables (and anything shaped like a bearer header) with a placeholder.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Iterable, Mapping

KEY_VARIABLES = ("OPENROUTER_API_KEY", "OPENAI_API_KEY", "TAVILY_API_KEY", "EXA_API_KEY", "GITHUB_TOKEN", "GH_TOKEN")
_BEARER = re.compile(r"(?i)\b(authorization\s*[:=]\s*)(bearer|token|basic)\s+[^\s\"']+")
_MIN_SECRET_LEN = 6  # shorter values would redact ordinary words
_REGISTERED: set[str] = set()
_LOCK = threading.Lock()


def register_secrets(values: Iterable[str]) -> None:
    """Redact these values too, for the rest of the process.

    Stages take their keys from an `env` mapping that need not be `os.environ` (the runner and the
    demo pass their own); a key that only lives there must be redacted all the same.
    """
    with _LOCK:
        _REGISTERED.update(v for v in values if isinstance(v, str) and len(v) >= _MIN_SECRET_LEN)


def register_env(env: Mapping[str, str]) -> None:
    """Register the key variables' values from an environment mapping."""
    register_secrets(env.get(name, "") for name in KEY_VARIABLES)


def redacting(echo: Callable[[str], None], env: Mapping[str, str] | None = None) -> Callable[[str], None]:
    """An `echo` that redacts every line; the keys of `env` (if given) are registered first."""
    if env is not None:
        register_env(env)

    def say(text: str) -> None:
        echo(redact(text))

    return say


def _secret_values() -> list[str]:
    with _LOCK:
        values = {os.environ.get(name, "") for name in KEY_VARIABLES} | _REGISTERED
    return sorted((v for v in values if len(v) >= _MIN_SECRET_LEN), key=len, reverse=True)


def redact(text: str) -> str:
    """Replace any live key value and any authorization header value with `[REDACTED]`."""
    for value in _secret_values():
        if value in text:
            text = text.replace(value, "[REDACTED]")
    return _BEARER.sub(lambda m: f"{m.group(1)}{m.group(2)} [REDACTED]", text)
