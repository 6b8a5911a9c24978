"""`python -m research_dispatch.fake serve`: the documented command, run by `research_dispatch_fakes`."""

from __future__ import annotations

from research_dispatch_fakes.__main__ import main

if __name__ == "__main__":
    raise SystemExit(main())
