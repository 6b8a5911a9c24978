"""Keep API keys out of everything we write.

Keys are never put into files, logs, traces or PR bodies on purpose; this module is the second line:
every text the product persists or prints passes through `redact`, which replaces the current values
of the key variables (and anything shaped like a bearer header) with a placeholder.
"""

from __future__ import annotations

import os
import re

KEY_VARIABLES = ("OPENROUTER_API_KEY", "TAVILY_API_KEY", "GITHUB_TOKEN", "GH_TOKEN")
_BEARER = re.compile(r"(?i)\b(authorization\s*[:=]\s*)(bearer|token|basic)\s+[^\s\"']+")
_MIN_SECRET_LEN = 6  # shorter values would redact ordinary words


def _secret_values() -> list[str]:
    values = {os.environ.get(name, "") for name in KEY_VARIABLES}
    return sorted((v for v in values if len(v) >= _MIN_SECRET_LEN), key=len, reverse=True)


def redact(text: str) -> str:
    """Replace any live key value and any authorization header value with `[REDACTED]`."""
    for value in _secret_values():
        if value in text:
            text = text.replace(value, "[REDACTED]")
    return _BEARER.sub(lambda m: f"{m.group(1)}{m.group(2)} [REDACTED]", text)
