"""The structured-output schemas are generated from the pydantic models that validate the answers
(`gateway/structured.answer_schema`): one definition per answer, in the strict form servers take."""

from __future__ import annotations

import enum
from typing import Any, Literal

import jsonschema
import pytest
from pydantic import BaseModel, ConfigDict, Field

from research_dispatch.gateway.structured import answer_schema
from research_dispatch.synthesis.align.judge import JUDGE_SCHEMA, Judgement
from research_dispatch.synthesis.check.citations import CHECK_SCHEMA, RECHECK_SCHEMA, CheckAnswers, RecheckAnswers
from research_dispatch.synthesis.extract.claims import EXTRACTION_SCHEMA, ExtractionAnswer
from research_dispatch.synthesis.extract.position import POSITION_SCHEMA, PositionAnswers


class Colour(str, enum.Enum):
    RED = "red"
    BLUE = "blue"


class Inner(BaseModel):
    model_config = ConfigDict(extra="forbid")

    colour: Colour
    note: str | None = Field(max_length=10)


class Outer(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=5)
    kind: Literal["a", "b"]
    counts: list[int] = Field(max_length=3)
    inner: list[Inner]


def test_a_model_becomes_a_closed_inline_schema_without_its_bounds() -> None:
    assert answer_schema(Outer) == {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "kind": {"type": "string", "enum": ["a", "b"]},
            "counts": {"type": "array", "items": {"type": "integer"}},
            "inner": {"type": "array", "items": {
                "type": "object",
                "properties": {"colour": {"type": "string", "enum": ["red", "blue"]},
                               "note": {"type": ["string", "null"]}},
                "required": ["colour", "note"],
                "additionalProperties": False}},
        },
        "required": ["name", "kind", "counts", "inner"],  # the model's field order: a stable prompt hash
        "additionalProperties": False,
    }


def _objects(node: Any) -> list[dict[str, Any]]:
    if isinstance(node, dict):
        found = [node] if node.get("type") == "object" else []
        return found + [o for value in node.values() for o in _objects(value)]
    if isinstance(node, list):
        return [o for value in node for o in _objects(value)]
    return []


ANSWERS: list[tuple[dict[str, Any], type[BaseModel], dict[str, Any]]] = [
    (EXTRACTION_SCHEMA, ExtractionAnswer, {"claims": [{
        "statement": "GRPO suits maths.", "layer": "RL algorithm", "stance": "recommend", "decision": "RL algorithm",
        "pick": "GRPO", "alternatives": ["PPO"], "condition": None, "position": "for", "units": ["U3"],
        "quote": "GRPO suits maths.", "sources": [1, 2], "confidence": "high"}]}),
    (JUDGE_SCHEMA, Judgement, {"groups": [{"label": "RL algorithm", "relation": "alternatives", "positions": [
        {"claims": ["c1"], "summary": "GRPO"}, {"claims": ["c2"], "summary": "PPO"}]}]}),
    (CHECK_SCHEMA, CheckAnswers, {"checks": [{"id": "k1", "verdict": "supports", "passage": "P1",
                                              "sentences": ["S2"], "quote": "GRPO suits maths."},
                                             {"id": "k2", "verdict": "does_not_address", "passage": None,
                                              "sentences": [], "quote": None}]}),
    (RECHECK_SCHEMA, RecheckAnswers, {"checks": [{"id": "k1", "answer": "no"}]}),
    (POSITION_SCHEMA, PositionAnswers, {"checks": [{"id": "p1", "position": "against", "condition": None}]}),
]


@pytest.mark.parametrize(("schema", "model", "answer"), ANSWERS,
                         ids=["extraction", "judgement", "citation check", "recheck", "position"])
def test_each_answer_schema_is_its_model_in_strict_form(schema: dict[str, Any], model: type[BaseModel],
                                                        answer: dict[str, Any]) -> None:
    assert schema == answer_schema(model)
    assert "$ref" not in str(schema) and "$defs" not in schema
    for obj in _objects(schema):
        assert obj["additionalProperties"] is False and obj["required"] == list(obj["properties"])
    model.model_validate(answer)  # an answer the model takes fills the schema, and the other way round
    jsonschema.validate(answer, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**answer, "extra": 1}, schema)
