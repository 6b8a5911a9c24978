"""The fakes' `realism` setting (docs/FAKES.md, "Realism"): slips real models and PDF pages make, drawn
deterministically from a seed, only in first answers, and refused loudly when the setting is malformed."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from research_dispatch_fakes import realism as rl
from research_dispatch_fakes import script_synthesis
from research_dispatch_fakes.gateway import FakeGateway
from research_dispatch_fakes.script_structured import respond_structured
from research_dispatch_fakes.tavily import FakeTavily
from tests.profiles import examples
from tests.synthesis.conftest import statement

GRPO = statement("rl-algorithm-grpo", "verl-trl")
PPO = "We do not recommend PPO for long chain-of-thought training because its critic doubles the memory"


def numbered_report(*sentences: str) -> str:
    """A report as the product numbers it for the extractor: one `[U<n>]` unit a line."""
    lines = ["## Recommendations", ""] + [f"[U{i}] {s} [{i}]." for i, s in enumerate(sentences, start=1)]
    return "\n".join(lines)


def extraction(report: str, *, session: str = "2026-H2:synthesis:04-verl-trl", repair: bool = False) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "extract"},
                                      {"role": "user", "content": f"Report title: T\n\n<report>\n{report}\n</report>"}]
    if repair:
        messages += [{"role": "assistant", "content": "{}"}, {"role": "user", "content": "Your answer was rejected"}]
    return {"model": "openai/gpt-5-mini", "session_id": session, "messages": messages,
            "response_format": {"type": "json_schema", "json_schema": {"name": "claim_extraction"}}}


def answer(body: dict[str, Any], realism: rl.Realism | None) -> list[dict[str, Any]]:
    return list(respond_structured(body, frozenset(), realism)["claims"])


REPORT = numbered_report(GRPO, PPO, "Streaming DiLoCo synchronises parameter fragments on a staggered schedule "
                         "across datacentres")


def test_perfect_answers_point_at_units_and_quote_their_opening_words() -> None:
    claims = answer(extraction(REPORT), None)
    by_unit = {c["units"][0]: c for c in claims}
    assert by_unit["U1"]["pick"] == "GRPO" and by_unit["U1"]["quote"] == " ".join(GRPO.split()[:12])
    assert (by_unit["U2"]["pick"], by_unit["U2"]["position"]) == ("PPO", "against")
    assert all("section" not in c for c in claims)  # a numbered report: code knows the section


def test_rate_zero_and_no_setting_answer_the_same() -> None:
    assert answer(extraction(REPORT), rl.Realism(0.0, 3)) == answer(extraction(REPORT), None)


def test_every_claim_slips_at_rate_one_and_the_malformed_claim_is_an_extra_one() -> None:
    perfect = answer(extraction(REPORT), None)
    slipped = answer(extraction(REPORT), rl.Realism(1.0, 3))
    assert len(slipped) == len(perfect) + 1  # one malformed claim among the good ones
    assert all(a != b for a, b in zip(perfect, slipped, strict=False))
    extra = slipped[-1]
    assert (len(extra["statement"]) > 1500 or not isinstance(extra["sources"], list)
            or not isinstance(extra["confidence"], str))


def test_a_question_asked_again_is_answered_without_slips() -> None:
    perfect = answer(extraction(REPORT), None)
    assert answer(extraction(REPORT, repair=True), rl.Realism(1.0, 3)) == perfect


@given(seed=st.integers(0, 10_000))
@settings(max_examples=examples(40), deadline=None)
def test_slips_are_a_function_of_the_seed_and_the_request(seed: int) -> None:
    setting = rl.Realism(0.5, seed)
    first = answer(extraction(REPORT), setting)
    assert first == answer(extraction(REPORT), setting)
    other = answer(extraction(REPORT, session="2026-H2:synthesis:02-diloco-family"), setting)
    perfect = answer(extraction(REPORT), None)
    for claims in (first, other):
        good = [c for c in claims if isinstance(c["confidence"], str) and isinstance(c["sources"], list)
                and len(c["statement"]) <= 1500]
        assert len(good) == len(perfect)
        for slipped, right in zip(good, perfect, strict=True):  # one slip at most, among the documented ones
            changed = {k for k in right if slipped[k] != right[k]}
            assert changed <= {"quote"} or changed <= {"units"} or changed <= {"position"} or changed <= {"pick"}
            if "pick" in changed:
                assert slipped["pick"] in script_synthesis._aliases(right["pick"])
            if "units" in changed:
                assert abs(int(slipped["units"][0][1:]) - int(right["units"][0][1:])) == 1


@given(text=st.text(alphabet="abcdefghijklmnopqrstuvwxyz ,.\n", min_size=1, max_size=400))
@settings(max_examples=examples(60), deadline=None)
def test_a_pdf_page_reads_back_as_the_page(text: str) -> None:
    setting = rl.Realism(1.0, 0)
    artefacts = rl.pdf_artefacts(text, setting, "https://arxiv.org/abs/2503.14476")
    assert rl.read_pdf(artefacts) == rl.read_pdf(text)
    assert rl.pdf_artefacts(text, setting, "https://github.com/volcengine/verl") == text  # not a PDF


@pytest.mark.parametrize("kind", rl.COPY_SLIPS)
def test_each_copy_slip_keeps_the_words(kind: str) -> None:
    sentence = "the default algorithm for reinforcement learning fine-tuning"
    copied = rl._copied(sentence, kind, (3,))
    words = [w.lower() for w in copied.replace("(3)", "").replace("...", " ").strip("\u201c\u201d.").split()]
    assert words == sentence.split()


def post(url: str, body: Any) -> int:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


@pytest.mark.parametrize("setting", [{"rate": 2}, {"rate": 0.3, "seed": "7"}, {"rate": 0.3, "speed": 1}, [0.3]])
def test_a_malformed_setting_is_refused_not_ignored(setting: Any) -> None:
    with pytest.raises(ValueError, match="realism"):
        FakeGateway(scenario={"realism": setting})
    with pytest.raises(ValueError, match="realism"):
        FakeTavily(scenario={"realism": setting})
    with FakeGateway() as gateway:
        assert post(gateway.root_url + "/__fake__/scenario", {"realism": setting}) == 400
        assert gateway.scenario == {}


def test_the_search_server_serves_arxiv_pages_as_pdf_text() -> None:
    from tavily import TavilyClient

    url = "https://arxiv.org/abs/2503.14476"
    with FakeTavily() as plain, FakeTavily(scenario={"realism": {"rate": 1.0, "seed": 0}}) as pdf:
        clean = TavilyClient(api_key="tvly-x", api_base_url=plain.base_url).extract([url])["results"][0]
        read = TavilyClient(api_key="tvly-x", api_base_url=pdf.base_url).extract([url])["results"][0]
    assert read["raw_content"] != clean["raw_content"]
    assert "\ufb01" in read["raw_content"] or "\ufb02" in read["raw_content"]
    assert rl.read_pdf(read["raw_content"]) == rl.read_pdf(clean["raw_content"])
