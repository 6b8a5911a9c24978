"""Regenerate the package data that is derived from this repository, so the wheel carries it.

* `research_dispatch/adopt/demo_review/`: the reference review (the five topic files, docs/METHODOLOGY.md and
  the `[tool.research-dispatch]` table), so that `pipx run research-dispatch demo` — no checkout — runs
  the same review as `make demo`;
* `research_dispatch/config/schemas/`: JSON Schemas of a topic file and of the `[tool.research-dispatch]`
  table, generated from the pydantic models in config.py (for editors and other tools; the models stay
  the authority: they also check what a schema cannot say, such as slug syntax).

tests/adopt/test_package_data.py fails when either drifts from its source; then run

    .venv/bin/python scripts/dev/sync_package_data.py
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

from research_dispatch.adopt.demo import BUNDLED_REVIEW, config_table  # noqa: E402
from research_dispatch.config.settings import Settings, Topic  # noqa: E402

PACKAGE = ROOT / "scripts" / "research_dispatch"
SCHEMAS = {"topic.schema.json": (Topic, "A research-dispatch topic file (topics/NN-<id>.yaml)"),
           "config.schema.json": (Settings, "The [tool.research-dispatch] table of pyproject.toml")}


def schema_text(name: str) -> str:
    model, title = SCHEMAS[name]
    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": title,
              **{k: v for k, v in model.model_json_schema().items() if k != "title"}}
    return json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def sync_demo_review() -> None:
    target = PACKAGE / "adopt" / BUNDLED_REVIEW
    topics = target / "topics"
    if topics.exists():
        shutil.rmtree(topics)
    topics.mkdir(parents=True)
    for path in sorted((ROOT / "topics").iterdir()):
        if path.is_file() and path.suffix in (".yaml", ".yml") and not path.name.startswith("."):
            shutil.copyfile(path, topics / path.name)
    shutil.copyfile(ROOT / "docs" / "METHODOLOGY.md", target / "METHODOLOGY.md")
    (target / "config.toml").write_text(config_table(ROOT / "pyproject.toml"), encoding="utf-8")


def sync_schemas() -> None:
    target = PACKAGE / "config" / "schemas"
    target.mkdir(exist_ok=True)
    for name in SCHEMAS:
        (target / name).write_text(schema_text(name), encoding="utf-8")


def main() -> int:
    sync_demo_review()
    sync_schemas()
    review, schemas = PACKAGE / "adopt" / BUNDLED_REVIEW, PACKAGE / "config" / "schemas"
    print(f"updated {review.relative_to(ROOT)} and {schemas.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
