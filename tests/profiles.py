"""Hypothesis profiles: `dev` (the default), `ci` (derandomized; chosen when `CI` is set) and `thorough`.

Why explicit: without them hypothesis's own `ci` profile derandomizes under `CI`, so CI replays one fixed
sequence of examples forever while a contributor's `make test` draws new ones on every run — a bug that
only some draws meet then turns a contributor's run red at random, and CI never sees it (issue 28). Here:

* `dev` draws fresh examples (and keeps the failing ones in `.hypothesis/` so a failure replays);
* `ci` is derandomized: the same examples on every CI run, so a red CI is always reproducible;
* `thorough` draws `THOROUGH_FACTOR` times as many examples, at random: run by the scheduled CI job and
  by hand (`make test-thorough`: every property of every tier), so what random draws find is still found.

No profile has a deadline: a test must not depend on the machine's speed. `HYPOTHESIS_PROFILE` names the
profile explicitly. Tests that set `max_examples` write `examples(n)`, so the thorough profile scales it.
"""

from __future__ import annotations

import os

from hypothesis import settings

THOROUGH_FACTOR = 20

settings.register_profile("dev", deadline=None)
settings.register_profile("ci", deadline=None, derandomize=True, database=None, print_blob=True)
settings.register_profile("thorough", deadline=None, max_examples=100 * THOROUGH_FACTOR, print_blob=True)


def chosen() -> str:
    """The profile this session runs: HYPOTHESIS_PROFILE, else `ci` under CI, else `dev`."""
    named = os.environ.get("HYPOTHESIS_PROFILE")
    if named:
        return named
    return "ci" if os.environ.get("CI") else "dev"


def examples(n: int) -> int:
    """A test's own example count, scaled up under the thorough profile."""
    return n * THOROUGH_FACTOR if chosen() == "thorough" else n


settings.load_profile(chosen())
