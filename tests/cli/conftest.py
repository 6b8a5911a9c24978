"""Shared pieces of the CLI matrix: every command as a user types it.

The helpers are the suite's own: `run_cli` of tests/clirun.py (the command in process, with the
environment given), `child_env`, `fake_env`, `make_repo` and `one_error` of tests/bounds/conftest.py (no
key unless given, the exit-2 contract), and the user's world of tests/reliability/userworld.py (a bare
`origin`, clones, the fake GitHub serving that origin). What is added here is only sharing: the fake
gateway and search servers live for a whole test module (each starts a server thread; the matrix runs
many short commands), so a test that scripts a fault does it through `scripted`, which puts the previous
scenario back afterwards.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from research_dispatch_fakes.gateway import FakeGateway
from research_dispatch_fakes.tavily import FakeTavily
from tests.bounds.conftest import child_env, fake_env


@dataclass(frozen=True)
class Fakes:
    """The module's fake gateway and search server, on 127.0.0.1."""

    gateway: FakeGateway
    tavily: FakeTavily

    def env(self, **extra: str) -> dict[str, str]:
        """A child's environment with the keys and base URLs of both fakes (plus `extra`)."""
        return child_env({**fake_env(self.gateway, self.tavily), **extra})

    def completions(self) -> int:
        """How many chat completions the gateway has answered so far (to prove "before any work")."""
        return len(self.gateway.completions)


@pytest.fixture(scope="module")
def fakes() -> Iterator[Fakes]:
    with FakeGateway() as gateway, FakeTavily() as tavily:
        yield Fakes(gateway, tavily)


@contextlib.contextmanager
def scripted(fakes: Fakes, scenario: dict[str, Any]) -> Iterator[None]:
    """The gateway follows `scenario` inside the block only (the module's other tests share it)."""
    fakes.gateway.set_scenario(scenario)
    try:
        yield
    finally:
        fakes.gateway.set_scenario({})
