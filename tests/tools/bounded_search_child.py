"""Child process for the call-bounds tests: one `web_search` through the product's toolset against a
hostile server; prints one JSON line with the tool's error kind, the seconds it took and the peak RSS."""

from __future__ import annotations

import json
import sys
import threading
import time

from research_dispatch.config.settings import SearchSettings
from research_dispatch.core.retry import RetryPolicy
from research_dispatch.tools.providers import ExaProvider, TavilyProvider
from research_dispatch.tools.search import SearchTools
from tests.memory import peak_rss_mb


def main() -> None:
    provider_name, base_url = sys.argv[1], sys.argv[2]
    timeout_s, interrupt_after = float(sys.argv[3]), float(sys.argv[4])
    provider = (ExaProvider(api_key="exa-child-key-0000", base_url=base_url) if provider_name == "exa"
                else TavilyProvider(api_key="tvly-child-key-0000", base_url=base_url))
    interrupt = threading.Event()
    if interrupt_after > 0:
        threading.Timer(interrupt_after, interrupt.set).start()
    tools = SearchTools(providers=[provider], settings=SearchSettings(), timeout_s=timeout_s,
                        retry=RetryPolicy(max_retries=0), interrupt=interrupt)
    started = time.monotonic()
    outcome = tools.call("web_search", json.dumps({"query": "DiLoCo"}))
    elapsed = time.monotonic() - started
    peak_mb = peak_rss_mb() or 0.0  # VmHWM: ru_maxrss would include the test worker's memory (tests/memory.py)
    print(json.dumps({"error": outcome.detail.get("error"), "seconds": round(elapsed, 2),
                      "peak_rss_mb": round(peak_mb, 1), "content": outcome.content[:300]}))


if __name__ == "__main__":
    main()
