"""One row per pick (issue 29.3), at the model seam: `synthesize` in-process over a scripted model.

Each test scripts what the extractor says about each report — the names, layers and decision wordings
real extractors give one option — and lets the fakes' scripted judge and citation checker answer the
rest (`tests/seam.py`). What is asserted is what a reviewer reads: the ledger's clusters and
divergences, and the rows of the document's decision table.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from research_dispatch.config.settings import load_settings
from research_dispatch.core.errors import GatewayError
from research_dispatch.synthesis import SynthesisResult, synthesize
from research_dispatch.synthesis.count.decisions import decisions
from tests.seam import Reply, ScriptedGateway, Sent, synthesis_model
from tests.synthesis.conftest import CYCLE, claim_json, ledger, say, scenario_repo

FAMILIES = {"01-a": ("openai/gpt-5", "exact"), "02-b": ("deepseek/deepseek-v4-pro", "exact"),
            "03-c": ("google/gemini-3.1-pro-preview", "exact"), "04-d": ("moonshotai/kimi-k2-thinking", "exact")}


def rec(sentence: str, pick: str, *, layer: str, decision: str | None) -> dict[str, Any]:
    """A recommendation as the extractor returns it, quoting its sentence."""
    return claim_json(sentence, layer, stance="recommend", decision=decision, pick=pick)


def synthesis(repo: Path, answers: dict[str, list[dict[str, Any]]],
              judge: Any = None) -> tuple[SynthesisResult, dict[str, Any], str]:
    """Each report says its claims' sentences; its extraction is scripted; the fakes answer the rest
    (`judge`, given, answers the alignment calls instead)."""
    gateway = ScriptedGateway(otherwise=lambda sent: judge(sent) if judge is not None and
                              sent.schema == "claim_alignment" else synthesis_model(sent))
    for stem, claims in answers.items():
        say(repo, stem, [c["quote"] for c in claims])
        gateway.enqueue(Reply(content=json.dumps({"claims": claims})), session=f"*:synthesis:{stem}")
    result = synthesize(repo, load_settings(repo), env={}, cycle=CYCLE, gateway=gateway)
    return result, ledger(repo), result.document_path.read_text(encoding="utf-8")


def table(document: str) -> list[str]:
    section = document.split("## TL;DR — decision table", 1)[1].split("\n## ", 1)[0]
    return [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| Layer")]


def test_one_pick_under_three_layers_and_three_names_is_one_convergent_row(tmp_path: Path) -> None:
    """vLLM, recommended by four families under "rollout engine", "inference engine" and "rollout
    generation" and named three ways, was three rows, two flagged single-source."""
    repo = scenario_repo(tmp_path, "vllm", FAMILIES)
    result, data, document = synthesis(repo, {
        "01-a": [rec("vLLM is the rollout engine to adopt for the trainer", "vLLM", layer="rollout engine",
                     decision="rollout engine")],
        "02-b": [rec("The vLLM engine is the inference engine to adopt for rollouts", "vLLM engine",
                     layer="inference engine", decision="inference engine for rollouts")],
        "03-c": [rec("vllm-project/vllm is the rollout generation backend to adopt", "vllm-project/vllm",
                     layer="rollout generation", decision="rollout generation backend")],
        "04-d": [rec("vLLM v0.8 is the rollout engine to adopt for asynchronous RL", "vLLM v0.8",
                     layer="rollout engine", decision="rollout engine")],
    })
    [cluster] = [c for c in data["clusters"] if c["pick_key"]]
    assert cluster["pick_key"] == "vllm" and cluster["status"] == "convergent"
    assert cluster["families"] == ["deepseek", "google", "moonshotai", "openai"]
    assert [d.verdict for d in decisions(data)] == ["Use vLLM (convergent — one shared source)"]
    rows = table(document)
    assert len(rows) == 1 and "vLLM" in rows[0] and "4 families" in rows[0]
    assert "single-source" not in "\n".join(rows) and data["counts"]["flagged"] == 0
    assert data["divergences"] == [] and result.counts["clusters"]["convergent"] == 1


def test_names_only_the_judge_knows_are_one_pick_when_it_says_so(tmp_path: Path) -> None:
    """Names code cannot tell apart ("PyTorch Monarch", "Monarch actor meshes") meet the judge across
    layers as candidate aliases; the judge puts them in one position, and they are one row."""
    repo = scenario_repo(tmp_path, "monarch", {k: v for k, v in FAMILIES.items() if k != "04-d"})
    _result, data, document = synthesis(repo, {
        "01-a": [rec("Monarch is the orchestration layer to adopt for RL", "Monarch", layer="orchestration",
                     decision="orchestration layer for RL post-training")],
        "02-b": [rec("PyTorch Monarch is the controller to adopt for RL jobs", "PyTorch Monarch",
                     layer="RL infrastructure", decision="job controller")],
        "03-c": [rec("Monarch actor meshes are the runtime to adopt for trainers", "Monarch actor meshes",
                     layer="distributed runtime", decision="distributed runtime")],
    })
    [cluster] = data["clusters"]
    assert len(cluster["batches"]) == 1, "the three names met one judge"
    assert cluster["status"] == "convergent" and len(cluster["families"]) == 3
    assert len(table(document)) == 1


POSTGRES = "Postgres is the primary database to adopt for the service"
REDIS = "Redis is the session cache to adopt for the service"


def storage(decision_postgres: str | None, decision_redis: str | None) -> dict[str, list[dict[str, Any]]]:
    """Postgres recommended by two families, Redis for a session cache by a third, every claim filed
    under the catch-all layer `general`."""
    return {"01-a": [rec(POSTGRES, "Postgres", layer="general", decision=decision_postgres)],
            "02-b": [rec(POSTGRES.replace("service", "platform"), "Postgres", layer="general",
                         decision=decision_postgres)],
            "03-c": [rec(REDIS, "Redis", layer="general", decision=decision_redis)]}


def test_an_unrelated_pick_in_layer_general_never_makes_a_convergence_divergent(tmp_path: Path) -> None:
    """Redis for a session cache turned a two-family Postgres convergence into "divergent" because all
    three claims sat in layer `general` (and the extractor named no decision)."""
    repo = scenario_repo(tmp_path, "general", {k: v for k, v in FAMILIES.items() if k != "04-d"})
    _result, data, document = synthesis(repo, storage(None, None))
    clusters = {c["pick_key"]: c for c in data["clusters"]}
    assert clusters["postgres"]["status"] == "convergent" and clusters["postgres"]["layer"] == "general"
    assert clusters["redis"]["status"] == "single_source"
    assert data["divergences"] == []
    assert sorted(d.verdict.split(" (")[0] for d in decisions(data)) == ["Use Postgres", "Use Redis"]
    assert "divergent" not in "\n".join(table(document))


def judge_says(relation: str) -> Any:
    """A judge that sets every recommended pick of its batch against the others, calling it `relation`."""
    def answer(sent: Sent) -> Reply | GatewayError:
        block = sent.last["content"].split("<claims>", 1)[1].rsplit("</claims>", 1)[0]
        items = [json.loads(line) for line in block.splitlines() if line.strip()]
        by_pick: dict[str, list[str]] = {}
        for item in items:
            if item["pick"]:
                by_pick.setdefault(item["pick"].lower(), []).append(item["id"])
        positions = [{"claims": ids, "summary": pick} for pick, ids in sorted(by_pick.items())]
        groups = [{"label": "storage", "relation": relation, "positions": positions}] if len(positions) > 1 else []
        return Reply(content=json.dumps({"groups": groups}))
    return answer


def test_a_divergence_of_two_picks_needs_the_judge_to_say_they_answer_one_decision(tmp_path: Path) -> None:
    """A judge that sets Redis against Postgres as "opposite" did not say they answer one decision: no
    divergence. Only `alternatives` — one decision, adopt one instead of the other — makes one."""
    three = {k: v for k, v in FAMILIES.items() if k != "04-d"}
    repo = scenario_repo(tmp_path, "opposite", three)
    _result, data, _document = synthesis(repo, storage("data store", "data store"), judge=judge_says("opposite"))
    clusters = {c["pick_key"]: c for c in data["clusters"]}
    assert clusters["postgres"]["status"] == "convergent" and data["divergences"] == []
    assert clusters["postgres"]["contradicts"] == []
    repo = scenario_repo(tmp_path, "alternatives", three)  # a new judge: another repository, no cached answer
    _result, data, _document = synthesis(repo, storage("data store", "data store"),
                                         judge=judge_says("alternatives"))
    [divergence] = data["divergences"]
    assert [p["pick"] for p in divergence["positions"]] == ["Postgres", "Redis"]
    assert divergence["kind"] == "alternatives" and not divergence["tie"]


def test_the_judge_sees_each_claims_sentence_and_position(tmp_path: Path) -> None:
    repo = scenario_repo(tmp_path, "shown", {k: v for k, v in FAMILIES.items() if k != "04-d"})
    against = claim_json("We do not recommend Redis as the session cache for the service", "general",
                         stance="recommend", decision="session cache", pick="Redis", position="against")
    seen: list[dict[str, Any]] = []

    def judge(sent: Sent) -> Reply | GatewayError:
        block = sent.last["content"].split("<claims>", 1)[1].rsplit("</claims>", 1)[0]
        seen.extend(json.loads(line) for line in block.splitlines() if line.strip())
        return synthesis_model(sent)

    synthesis(repo, {"01-a": [rec(REDIS, "Redis", layer="general", decision="session cache")],
                     "02-b": [against], "03-c": [rec(REDIS, "Redis", layer="general", decision="session cache")]},
              judge=judge)
    # the judge sees the report's whole sentence (its citation marker and full stop included), never a copy
    shown = {item["sentence"]: item["position"] for item in seen}
    assert shown[f"{against['quote']} [1]."] == "against" and shown[f"{REDIS} [1]."] == "for"
