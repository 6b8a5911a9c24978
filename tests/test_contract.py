"""The conversation contract (`research_dispatch.leg.contract`): one source for what the researcher sends
and the fake's scripted model keys on.

Static checks read the source (AST): the researcher sends no follow-up the contract does not declare,
the contract holds no product logic (standard library only), and the fakes import nothing else of the
product. That every user message a leg actually sends after the brief is a declared follow-up is checked
at the model seam (tests/test_researcher_loop.py), where the script reaches each follow-up on purpose.
"""

from __future__ import annotations

import ast
import itertools
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from research_dispatch.config.settings import Budget, SearchSettings, WordBand
from research_dispatch.leg import contract, report, researcher
from research_dispatch.leg.researcher import LegSpec, Researcher
from research_dispatch.tools.search import SearchTools
from research_dispatch_fakes import script_researcher
from tests.seam import ScriptedSearch

LEG = Path(researcher.__file__).parent
FAKES = LEG.parent.parent / "research_dispatch_fakes"
FOLLOW_UP_NAMES = {name for name in dir(contract) if getattr(contract, name) in contract.FOLLOW_UPS
                   and name.isupper() and not name.endswith("_PREFIX")}


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _contract_name(node: ast.expr) -> str | None:
    """`contract.NAME` or `contract.NAME.format(...)` -> NAME; anything else -> None."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format":
        node = node.func.value
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "contract":
        return node.attr
    return None


def _functions(tree: ast.Module) -> dict[str, ast.FunctionDef]:
    return {n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}


# ----------------------------------------------------------------------------------------------
# the researcher sends only declared follow-ups


def test_every_follow_up_the_researcher_sends_is_declared_in_the_contract() -> None:
    tree = _tree(LEG / "researcher.py")
    said = [node for node in ast.walk(tree) if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "_say"]
    names = [_contract_name(call.args[0]) for call in said]
    assert said and None not in names, "every _say(...) sends a contract.<FOLLOW-UP> (or its .format(...))"
    assert set(names) == FOLLOW_UP_NAMES  # each declared follow-up is sent, and nothing else


def test_no_user_message_is_written_outside_the_brief_and_the_follow_ups() -> None:
    """A user message built anywhere else (a literal dict, another helper) would bypass the contract."""
    functions = _functions(_tree(LEG / "researcher.py"))
    # the research brief; the writing call's brief, plan and dossier; the follow-ups
    allowed = {functions["__init__"], functions["writing_conversation"], functions["_say"]}
    for function in functions.values():
        for node in ast.walk(function):
            if isinstance(node, ast.Dict) and any(
                    isinstance(k, ast.Constant) and k.value == "role" and isinstance(v, ast.Constant)
                    and v.value == "user" for k, v in zip(node.keys, node.values, strict=True)):
                assert function in allowed, f"researcher.{function.name} writes a user message itself"


def test_no_contract_string_is_copied_into_the_researcher_or_the_fakes() -> None:
    prefixes = (*contract.FOLLOW_UP_PREFIXES, contract.TOPIC_ID_LABEL, contract.BRIEF_LABEL, "Write between")
    for path in [LEG / "researcher.py", *sorted(FAKES.glob("*.py"))]:
        tree = _tree(path)
        docstrings = {id(body[0].value) for node in ast.walk(tree)
                      if isinstance(body := getattr(node, "body", None), list) and body
                      and isinstance(body[0], ast.Expr)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                assert not node.value.lstrip().startswith(prefixes), f"{path.name}: {node.value[:60]!r}"


def test_each_follow_up_starts_with_its_prefix_and_no_prefix_shadows_another() -> None:
    assert len(contract.FOLLOW_UPS) == len(contract.FOLLOW_UP_PREFIXES) == len(FOLLOW_UP_NAMES)
    for text, prefix in zip(contract.FOLLOW_UPS, contract.FOLLOW_UP_PREFIXES, strict=True):
        assert text.startswith(prefix)
    for prefix in contract.FOLLOW_UP_PREFIXES:
        assert [p for p in contract.FOLLOW_UP_PREFIXES if p.startswith(prefix)] == [prefix]


# ----------------------------------------------------------------------------------------------
# the contract is a protocol, not product logic, and the only part of the product the fakes see


def _imported_modules(tree: ast.Module) -> set[str]:
    modules: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            modules.add(node.module)
    return modules


def test_the_contract_imports_only_the_standard_library() -> None:
    imported = _imported_modules(_tree(LEG / "contract.py"))
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}, imported


def test_the_fakes_import_nothing_of_the_product_but_the_contract() -> None:
    for path in sorted(FAKES.glob("*.py")):
        product = {m for m in _imported_modules(_tree(path)) if m.split(".")[0] == "research_dispatch"}
        foreign = {m for m in product if m != "research_dispatch.leg.contract"}
        assert not foreign, f"research_dispatch_fakes/{path.name} imports {sorted(foreign)}"


# ----------------------------------------------------------------------------------------------
# both sides read the same strings


def _researcher(scope: str = "  The brief.\n") -> Researcher:
    spec = LegSpec(topic_id="diloco-family", title="DiLoCo: low-communication training", scope=scope,
                   model="a/b", provider=None, session_id="c:s", words=WordBand(min=1200, max=1500),
                   budget=Budget(max_steps=9), today="2026-12-04")
    tools = SearchTools(providers=[ScriptedSearch()], settings=SearchSettings())
    return Researcher(None, tools, spec)  # type: ignore[arg-type]  # the opening messages need no gateway


def _researcher_messages() -> list[dict[str, Any]]:
    return _researcher().messages


def test_the_fake_reads_the_researchers_brief() -> None:
    conversation = script_researcher.parse_conversation(_researcher_messages())
    assert (conversation.topic_id, conversation.title) == ("diloco-family", "DiLoCo: low-communication training")
    assert conversation.brief == "The brief."  # the brief alone: the date and what follows are not part of it
    assert f"{contract.DATE_LABEL} 2026-12-04" in _researcher_messages()[1]["content"]


def test_the_fake_reads_the_writing_call() -> None:
    """The writing call: the band in its system prompt, the brief, the plan and the dossier's sources."""
    dossier = ('[Plan item 1: how much it saves]\n<source id="S2" url="https://arxiv.org/abs/2311.08105" '
               'title="DiLoCo">\nDiLoCo communicates 500 times less.\n\nIt uses Nesterov momentum.\n</source>')
    messages = _researcher().writing_conversation("1. how much it saves\n2. who runs it", dossier)
    conversation = script_researcher.parse_conversation(messages)
    assert conversation.band == (1200, 1500) and conversation.brief == "The brief."
    assert contract.BAND_SENTENCE.format(min_words=1200, max_words=1500) in messages[0]["content"]
    assert conversation.plan == ["how much it saves", "who runs it"] and conversation.groups == {1: [2]}
    assert [(s.id, s.url) for s in conversation.sources] == [(2, "https://arxiv.org/abs/2311.08105")]
    assert script_researcher.classify({"messages": messages}) == "write"  # no tools offered: the write


@pytest.mark.parametrize(("follow_up", "kind"), [
    (contract.CONTINUE, "continue"),
    (contract.REVISE.format(words=300, min_words=1200, max_words=1500, verb="Expand"), "revise"),
    (contract.GAP_CHECK.format(stalled="", plan="1. a sub-question", read="S1", snippets="none"), "gap_answer"),
    (contract.GAPS.format(gaps="1. a sub-question — no source yet", turns=1), "gap_research"),
    (contract.START_RESEARCH, "search"),  # the plan was stated: the script searches
    (contract.EMPTY_REPLY, "search"),  # nothing special: the script goes on where it stands
])
def test_the_fake_recognises_each_follow_up(follow_up: str, kind: str) -> None:
    messages = [*_researcher_messages(), {"role": "assistant", "content": "1. A sub-question."},
                {"role": "user", "content": follow_up}]
    tools = [{"type": "function", "function": {"name": "web_search", "parameters": {}}}]
    body = {"messages": messages, "tools": tools, "tool_choice": "none" if kind == "gap_answer" else "auto"}
    assert script_researcher.classify(body) == kind


# ----------------------------------------------------------------------------------------------
# one word count


def test_one_word_count_for_the_product_and_the_fake() -> None:
    assert report.count_words is contract.count_words
    assert script_researcher.count_words is contract.count_words


_word = st.from_regex(r"[A-Za-z][a-z]{0,8}", fullmatch=True)
_noise = st.sampled_from(["[S1]", "[S2, S14]", "[3]", "https://example.org/a-b", "—", "##", "*", "(", ")"])


@given(st.lists(_word, min_size=0, max_size=30), st.lists(_noise, max_size=30))
def test_citations_urls_and_punctuation_are_not_words(words: list[str], noise: list[str]) -> None:
    text = " ".join(words)
    noisy = " ".join(w for pair in itertools.zip_longest(words, noise, fillvalue="") for w in pair)
    assert contract.count_words(text) == len(words) == contract.count_words(noisy)


_clause = st.text(alphabet=st.characters(whitelist_categories=("Ll", "Lu", "Nd"), whitelist_characters=" ,'-"),
                  min_size=3, max_size=60).map(str.strip).filter(lambda s: len(s) >= 3 and ";" not in s)


@given(_clause, st.lists(st.integers(1, 40), min_size=1, max_size=3), st.sampled_from(["S", ""]))
def test_a_recommendations_citation_vouches_for_its_evidence_not_the_writers_framing(
        evidence: str, ids: list[int], prefix: str) -> None:
    """The citation judge is given what a citation vouches for (`cited_part`): the evidence of a line in the
    contract's forms — the decision, pick over alternatives, switch condition and confidence are the writer's
    — as the model writes it (`[S3]`) and as the report has it (`[3]`); any other sentence whole."""
    marker = "[" + ", ".join(f"{prefix}{n}" for n in ids) + "]"
    cited = f"{evidence} {marker}"
    line = contract.RECOMMENDATION.format(decision="RL algorithm", pick="GRPO", alternatives="PPO and RLOO",
                                          evidence=cited, switch_to="DAPO", condition="rollouts grow long",
                                          confidence="high").removeprefix("- ")
    assert contract.cited_part(line) == cited
    rejected = contract.NOT_RECOMMENDED.format(option="PPO", decision="RL algorithm", evidence=cited)
    assert contract.cited_part(rejected) == cited
    assert contract.cited_part(f"GRPO is used widely {marker}.") == f"GRPO is used widely {marker}."


def test_a_recommendation_that_cites_its_condition_too_is_judged_whole() -> None:
    line = ("- **RL algorithm:** GRPO over PPO — INTELLECT-2 trained with it [S1]; switch to DAPO when rollouts "
            "pass 20k tokens [S2]; confidence medium.")
    assert contract.cited_part(line) == line
