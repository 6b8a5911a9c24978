"""Fresh interpreters lose no leg (issue 11, build 1; issue 20).

On main before the fix, 7 of 10 fresh `run --jobs 6` lost 1-5 legs to "partially initialized module
'httpx' has no attribute 'URL'": the leg threads performed the first imports of openai/httpx/tavily
concurrently. The suite never saw it because it ran in one warm interpreter. The guard is deterministic:
a fresh interpreter runs a leg with an import hook, and any module first imported on a leg thread fails
it, whether or not a race happens to hit. Since issue 20 every stage module imports what it uses at its
top, so the product's modules load in the main thread; what the hook still watches is the client
libraries' own lazy loading (`run/preload.py`). One leg exercises every import a leg makes, so the
ten repeated fresh runs and five fresh demos this file used to hold (about a minute) are gone.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.bounds.conftest import CYCLE, child_env, fake_env, make_repo

pytestmark = pytest.mark.slow

reliability = pytest.mark.reliability

TRACER = """
import sys, threading
seen = []
class Recorder:
    def find_spec(self, name, path=None, target=None):
        if threading.current_thread().name.startswith("leg"):
            seen.append(name)
        return None
sys.meta_path.insert(0, Recorder())
from research_dispatch.cli import main
try:
    main(["run", "--repo", sys.argv[1], "--jobs", "6", "--no-publish", "--cycle", sys.argv[2]])
except SystemExit as exc:
    code = exc.code
print("IMPORTED-ON-LEG-THREADS " + ",".join(sorted(set(seen))))
sys.exit(code)
"""


@reliability(area="bounds", case="modules first imported on a leg thread during `run` (fresh interpreter, import "
                                  "hook, one leg)",
             expect="none: the stage modules import their clients at the top and the clients' lazy parts are "
                    "preloaded before the first leg thread starts, so no first import can race another")
def test_no_module_is_first_imported_on_a_leg_thread(tmp_path: Path, gateway: Any, tavily: Any) -> None:
    repo = make_repo(tmp_path, ("02-",))  # one leg makes every import a leg makes
    done = subprocess.run([sys.executable, "-c", TRACER, str(repo), CYCLE], capture_output=True, text=True,
                          timeout=300, env=child_env(fake_env(gateway, tavily)))
    line = next(line for line in done.stdout.splitlines() if line.startswith("IMPORTED-ON-LEG-THREADS"))
    assert line.split(" ", 1)[1].strip() == "", line
    assert done.returncode == 0, done.stdout + done.stderr
