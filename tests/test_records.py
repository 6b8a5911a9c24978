"""Records read back from disk (`core/records.py`: pydantic over the `@record` dataclass, plus the sign
rule): any value in any field of a status file or a call-log line either reads back as exactly the type
its annotation says, or is refused with a `ValueError` that starts with the field's name — never
accepted as something else, never an exception of another kind."""

from __future__ import annotations

import dataclasses
import json
import math
import types
import typing
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from research_dispatch.core.records import check_value, load_record
from research_dispatch.gateway.provenance import CallRecord
from research_dispatch.leg.status import LegResult, LegState
from tests.profiles import examples

STATUS = json.loads(LegResult(stem="02-x", topic="x", model="a/b", family="a", status=LegState.OK).to_json())
CALL = json.loads(CallRecord(
    generation_id="gen-1", requested_model="a/b", requested_provider=None, served_model="a/b", served_provider="A",
    metadata_present=True, attempt=1, attempts_recorded=1, strategy=None, cached=False, finish_reason="stop",
    native_finish_reason=None, prompt_tokens=10, completion_tokens=5, cached_tokens=0, reasoning_tokens=0,
    cost_usd=0.01, latency_s=1.5, retries=0, purpose="research", verdict="exact").to_json())  # every field
json_values = st.recursive(st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats() | st.text(max_size=8),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                                                          max_size=3),
                           max_leaves=6)


def _fits(value: Any, hint: Any) -> bool:
    """The strict reading of an annotation: exact types, finite and non-negative numbers."""
    options = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else (hint,)
    for option in options:
        if option is type(None) and value is None:
            return True
        if typing.get_origin(option) is list:
            (item,) = typing.get_args(option)
            if isinstance(value, list) and all(_fits(v, item) for v in value):
                return True
        elif option is bool and isinstance(value, bool):
            return True
        elif option is int and isinstance(value, int) and not isinstance(value, bool):
            return value >= 0
        elif option is float and isinstance(value, int | float) and not isinstance(value, bool):
            return math.isfinite(value) and value >= 0
        elif option is str and isinstance(value, str):
            return True
        elif isinstance(option, type) and issubclass(option, LegState) and isinstance(value, str):
            return value in {"ok", "degraded", "failed"}  # an attempt's outcome; other states are refused
    return False


@pytest.mark.slow
@pytest.mark.parametrize(("cls", "base", "required"), [(LegResult, STATUS, ("stem", "topic", "model", "family",
                                                                          "status")),
                                                         (CallRecord, CALL, None)], ids=["status", "call"])
@settings(max_examples=examples(150), deadline=None)
@given(data=st.data())
def test_a_field_reads_back_as_its_type_or_is_refused_naming_it(cls: type[Any], base: dict[str, Any],
                                                                 required: tuple[str, ...] | None,
                                                                 data: st.DataObject) -> None:
    field = data.draw(st.sampled_from([f.name for f in dataclasses.fields(cls)]))
    value = data.draw(json_values)
    text = json.dumps({**base, field: value})
    hint = typing.get_type_hints(cls)[field]
    try:
        record = load_record(text, cls, required=required) if cls is CallRecord else LegResult.from_json(text)
    except ValueError as exc:
        assert not _fits(value, hint), (field, value, exc)
        assert str(exc).startswith(field), str(exc)
        return
    assert _fits(value, hint), (field, value)
    assert getattr(record, field) == value or (isinstance(value, int) and getattr(record, field) == float(value))


@given(json_values)
def test_a_number_check_refuses_exactly_what_a_record_field_would(value: Any) -> None:
    try:
        check_value("cost_usd", value, float)
    except ValueError as exc:
        assert not _fits(value, float) and str(exc).startswith("cost_usd: ")
    else:
        assert _fits(value, float)
