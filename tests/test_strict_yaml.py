"""The strict YAML rules (`core/strictyaml.check_events`, written once) run on two parsers' event streams —
libyaml's (fast, the reading path) and PyYAML's pure-Python one (the fallback where PyYAML has no libyaml)
— and the two readings must agree: the same data for every document they accept, the same refusal
(problem text) for every document they refuse."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from research_dispatch.core import strictyaml
from research_dispatch.core.errors import BadInput
from research_dispatch.core.strictyaml import MAX_YAML_DEPTH, load_documents
from tests.profiles import examples


def test_this_environment_reads_with_libyaml() -> None:
    assert yaml.__with_libyaml__, "PyYAML without libyaml: the product falls back to the slow reader"


def python_reading(text: str) -> tuple[str, Any]:
    try:
        return "ok", load_documents(text, yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        return "refused", exc.problem


def libyaml_reading(text: str) -> tuple[str, Any]:
    try:
        return "ok", load_documents(text, yaml.CSafeLoader)
    except yaml.MarkedYAMLError as exc:
        return "refused", exc.problem


keys = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1, max_size=8)
scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20)
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
                      max_leaves=25)


@pytest.mark.slow
@settings(max_examples=examples(300), deadline=None)
@given(values, st.sampled_from([None, True]))
def test_both_readings_agree_on_any_dumped_document(value: Any, flow: bool | None) -> None:
    text = yaml.safe_dump({"root": value}, default_flow_style=flow, allow_unicode=True)
    assert libyaml_reading(text) == python_reading(text)


def nested(depth: int) -> str:
    return "x: " + "[" * depth + "]" * depth + "\n"


@pytest.mark.parametrize("text", [
    "a: &x 1\nb: *x\n",  # alias
    "a: &x 1\n",  # an anchor alone
    "a: 1\na: 2\n",  # duplicate key
    "a: {b: 1, b: 2}\n",  # duplicate key in a nested flow mapping
    "1: a\n",  # a key that is not a string
    "true: a\n",
    "? [a]\n: 1\n",  # a collection as key
    nested(MAX_YAML_DEPTH - 1), nested(MAX_YAML_DEPTH), nested(MAX_YAML_DEPTH + 1),
    "a: [1, {b: [2, {c: 3}]}]\n",
    "---\na: 1\n---\nb: 2\n",
])
def test_hand_written_cases_agree(text: str) -> None:
    python = python_reading(text)
    libyaml = libyaml_reading(text)
    if python[0] == "refused" and python[1] != libyaml[1]:
        # a collection as a key: the Python loader names the constructed key, libyaml says what it is
        assert "mapping keys must be strings" in str(python[1]) and "a collection" in str(libyaml[1])
    else:
        assert libyaml == python


def test_libyaml_own_depth_cap_reads_as_ours() -> None:
    with pytest.raises(BadInput, match=f"nesting deeper than {MAX_YAML_DEPTH} levels"):
        strictyaml.load_yaml_text(nested(1000), path="t.yaml")
