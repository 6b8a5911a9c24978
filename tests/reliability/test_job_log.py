"""Gateway text reaches the job log inert: no workflow command, no mention (`sanitize.for_log`).

The Actions runner reads every line a step prints: `::add-mask::`, `::error::` at a line's start (after
whitespace) and the legacy `##[error]`/`##[add-mask]` anywhere in a line. A gateway error message is
text from a service (and, through a provider, from a model): it is printed by `research` and `run` in
the job log. Fresh processes against the fake gateway (`userworld.py`): a step's log is everything the
process and the processes it starts print, which only a real process shows.
"""

from __future__ import annotations

import pytest

from tests.reliability.userworld import STEMS, TOPIC_IDS, UserWorld, user_world  # noqa: F401  (the fixture)
from tests.test_neutralise import commands

pytestmark = pytest.mark.slow

reliability = pytest.mark.reliability
HOSTILE = ("upstream said ##[error]forged annotation ##[add-mask]hide-this \r::add-mask::also-this\n"
           "  ::warning file=x::forged \u2003::error::again, ask @octocat")


@reliability(area="gateway", case="{id}: the gateway's error message carries `##[error]`, `##[add-mask]` mid-line, "
                                  "`::add-mask::` after a carriage return and `::error::` after whitespace",
             expect="`research` and `run` still say the leg failed and why, and no line they print is a workflow "
                    "command for the runner (either parser) or an @-mention")
@pytest.mark.parametrize("command", ["research", "run"])
def test_gateway_text_in_the_job_log_forges_no_command(user_world: UserWorld, command: str) -> None:  # noqa: F811
    world = user_world
    clone = world.clone()
    world.gateway.set_scenario({"rules": [{"match": {"session": f"*:{STEMS['A']}"}, "status": 400,
                                           "message": HOSTILE}]})
    args = [TOPIC_IDS["A"]] if command == "research" else ["--topics", TOPIC_IDS["A"], "--no-publish"]
    done = world.process(clone, command, *args)
    assert done.code == 1, done
    assert "forged annotation" in done.output, done  # the reason is said...
    assert commands(done.output) == [], done  # ...and nothing in it is a command
    assert "@octocat" not in done.output
