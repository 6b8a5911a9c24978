"""Copy this repository's reference review into the package, for `research-dispatch demo` from a wheel.

`research_dispatch/demo_review/` holds the five topic files, docs/METHODOLOGY.md and the
`[tool.research-dispatch]` table, so that `pipx run research-dispatch demo` (no checkout) runs the same
review as `make demo`. tests/adopt/test_package.py fails when the copy drifts; run this to refresh it:

    .venv/bin/python scripts/sync_demo_review.py
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

from research_dispatch.demo import BUNDLED_REVIEW, config_table  # noqa: E402


def main() -> int:
    target = ROOT / "scripts" / "research_dispatch" / BUNDLED_REVIEW
    topics = target / "topics"
    if topics.exists():
        shutil.rmtree(topics)
    topics.mkdir(parents=True)
    for path in sorted((ROOT / "topics").iterdir()):
        if path.is_file() and path.suffix in (".yaml", ".yml") and not path.name.startswith("."):
            shutil.copyfile(path, topics / path.name)
    shutil.copyfile(ROOT / "docs" / "METHODOLOGY.md", target / "METHODOLOGY.md")
    (target / "config.toml").write_text(config_table(ROOT / "pyproject.toml"), encoding="utf-8")
    print(f"updated {target.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
