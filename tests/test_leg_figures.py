"""The research leg's figures (scripts/dev/leg_figures.py, shared by the benchmark and the real-model check), and
the real-model check itself run against the fakes (scripts/dev/real_check.py: a maintainer runs it with keys)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from research_dispatch.leg import contract
from tests.conftest import ROOT


def _load(name: str) -> ModuleType:
    sys.path.insert(0, str(ROOT / "scripts" / "dev"))
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / "dev" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


lf = _load("leg_figures")


def facts(body: str = "", request: str | None = "", evidence: tuple[tuple[str, str, str], ...] = (),
          cited: tuple[str, ...] = ("https://a.org/1",), scope: str = "") -> object:
    return lf.LegFacts(stem="s", topic="t", scope=scope, body=body, cited_urls=cited,
                       evidence=tuple(lf.Passage(*e) for e in evidence), write_request=request)


def test_evidence_at_write_counts_the_cited_sources_passages_present_in_the_request() -> None:
    evidence = (("https://a.org/1", "web_extract", "Alpha passage."), ("https://a.org/1", "web_search", "Beta."),
                ("https://b.org/2", "web_extract", "Not cited, not counted."))
    leg = facts(request="... Alpha passage. ... [compacted: shown earlier]", evidence=evidence)
    assert lf.evidence_at_write(leg) == (len("Alpha passage."), len("Alpha passage.") + len("Beta."))
    assert lf.evidence_at_write(facts(request=None, evidence=evidence))[0] == 0  # unknown request: nothing present


def test_a_cited_source_only_seen_as_a_snippet_counts_as_snippet_only() -> None:
    evidence = (("https://a.org/1", "web_search", "S."), ("https://a.org/2", "web_search", "S."),
                ("https://a.org/2", "mcp:docs__read", "Read."))
    assert lf.snippet_only(facts(evidence=evidence, cited=("https://a.org/1", "https://a.org/2"))) == (1, 2)


def test_brief_items_are_the_clauses_of_its_lists_and_its_asking_sentences() -> None:
    scope = ("Compare VeRL (https://arxiv.org/abs/2409.19256) and TRL. Be precise about the algorithms: how "
             "each implements GRPO, the exact loss normalisation, and how importance sampling is applied. "
             "Find: the base model; the reward signals (environments, rollouts). End with a recommendation.")
    assert lf.brief_items(scope) == ["Compare VeRL and TRL", "how each implements GRPO", "the exact loss normalisation",
                                     "how importance sampling is applied", "the base model",
                                     "the reward signals (environments, rollouts)", "End with a recommendation"]
    body = ("## Findings\n\nVeRL implements GRPO with a Ray controller [1]. The base model is unknown.\n"
            "The reward signals come from unit tests [2].\n")
    assert lf.covered(["how each implements GRPO", "the base model", "the reward signals"], body) == \
        [True, False, True]  # a sentence without a citation covers nothing


def test_recommendation_lines_parse_in_the_contracts_forms_with_a_citation() -> None:
    decision = contract.RECOMMENDATION.format(decision="RL algorithm", pick="GRPO", alternatives="PPO",
                                              evidence="it needs no value model [2]", switch_to="PPO",
                                              condition="a value model is cheap", confidence="high")
    rejected = contract.NOT_RECOMMENDED.format(option="RLOO", decision="RL algorithm",
                                               evidence="its variance is higher [3]")
    body = (f"# T\n\n## Recommendations\n\n{decision}\n{rejected}\n- Use GRPO today [1].\n"
            f"{decision.replace(' [2]', '')}\n\n## Open questions\n\nNone.\n")
    assert lf.recommendation_structure(body) == (2, 4)  # free prose and an uncited decision do not parse
    parsed = lf.parse_recommendation(decision)
    assert parsed is not None and parsed.kind == "decision"
    assert {k: parsed.fields[k] for k in ("decision", "pick", "alternatives", "switch_to", "condition",
                                          "confidence")} == {
        "decision": "RL algorithm", "pick": "GRPO", "alternatives": "PPO", "switch_to": "PPO",
        "condition": "a value model is cheap", "confidence": "high"}
    claims = [{"stance": "recommend", "decision": "d", "condition": "c"}, {"stance": "recommend", "decision": "d"},
              {"stance": "describe"}]
    assert lf.recommend_claims_structured(claims) == (1, 2)


@pytest.mark.slow
def test_the_real_model_check_runs_before_and_after_and_prints_the_figures(tmp_path: Path) -> None:
    """Against the fakes (`--fake`), this checkout as both versions, one topic: what a maintainer runs with
    keys against two refs."""
    out = tmp_path / "rows.json"
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "dev" / "real_check.py"), "--model",
                           "deepseek/deepseek-v4-pro", "--before", ".", "--after", ".", "--fake", "--topics",
                           "diloco-family", "--json", str(out)], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    header = done.stdout.splitlines()[0].split()
    assert header[:3] == ["version", "leg", "status"] and "evid@write" in header
    rows = json.loads(out.read_text())
    assert [(r["version"], r["stem"], r["status"]) for r in rows] == [("before", "02-diloco-family", "ok"),
                                                                      ("after", "02-diloco-family", "ok")]
    assert all(r["evidence"] == 1.0 and r["structure"] == 1.0 and r["search_usd"] > 0 for r in rows)
    bad = subprocess.run([sys.executable, str(ROOT / "scripts" / "dev" / "real_check.py"), "--model", "not a slug",
                          "--before", ".", "--after", "."], capture_output=True, text=True, cwd=ROOT)
    assert bad.returncode == 2 and "--model" in bad.stderr
