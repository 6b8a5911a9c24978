"""What the scripted researcher cites (docs/FAKES.md, "What the scripted researcher cites"): the topic's
framing is never a cited finding, and every `miscite_every`-th sentence it takes from a source is cited to
a page that does not contain it — what the synthesis's citation check must catch (issue 23).

Pure logic over the fake's own corpus: a conversation whose sources are the topic's pages, read in full.
"""

from __future__ import annotations

import re

import pytest

from research_dispatch_fakes import corpus
from research_dispatch_fakes import script_researcher as sr

TOPIC = "diloco-family"


def conversation() -> sr.Conversation:
    pages = [p for p in corpus.load_pages() if TOPIC in p.topics]
    sources = [sr.Source(i, p.url, p.title, p.content) for i, p in enumerate(pages, start=1)]
    return sr.Conversation(topic_id=TOPIC, title="DiLoCo family", brief="Survey DiLoCo, Streaming DiLoCo, "
                           "OpenDiLoCo, PRIME-RL and INTELLECT-2.", sources=sources)


def quoted(report: str, conv: sr.Conversation) -> list[tuple[str, int]]:
    """(sentence, cited id) of every sentence the report took from a page (its writer's source pools), in
    report order."""
    pool = {sentence for sentences in sr._Writer(conv).pools for sentence in sentences}
    found = [(match.start(), sentence, int(match.group(1))) for sentence in pool
             for match in re.finditer(re.escape(sentence) + r" \[S(\d+)\]", report)]
    return [(sentence, sid) for _, sentence, sid in sorted(found)]


def contains(conv: sr.Conversation, sid: int, sentence: str) -> bool:
    source = next(s for s in conv.sources if s.id == sid)
    return sentence.lower() in sr._clean_space(source.text).lower()


def test_the_topic_framing_is_never_a_cited_finding() -> None:
    conv = conversation()
    framing = sr.framing_keys(TOPIC)
    assert framing  # every page of the topic carries it
    report = sr.write_report(conv, conv.midpoint)
    text = " ".join(report.lower().split())
    assert [key for key in framing if key in text] == []
    assert quoted(report, conv)  # what the pages themselves say is still quoted and cited


@pytest.mark.parametrize("every", [2, 3])
def test_every_nth_sentence_taken_from_a_page_is_cited_to_one_that_does_not_say_it(every: int) -> None:
    conv = conversation()
    faithful = quoted(sr.write_report(conv, conv.midpoint, miscite_every=0), conv)
    assert len(faithful) >= every and all(contains(conv, sid, sentence) for sentence, sid in faithful)
    report = sr.write_report(conv, conv.midpoint, miscite_every=every)
    assert report == sr.write_report(conv, conv.midpoint, miscite_every=every)  # deterministic
    taken = quoted(report, conv)
    assert [sentence for sentence, _ in taken] == [sentence for sentence, _ in faithful]  # same sentences
    miscited = [index for index, (sentence, sid) in enumerate(taken, start=1) if not contains(conv, sid, sentence)]
    assert miscited == [n for n in range(1, len(taken) + 1) if n % every == 0]
    words = sr._content_words
    for index in miscited:
        sentence, sid = taken[index - 1]
        others = [s for s in conv.sources if not contains(conv, s.id, sentence)]
        fewest = min(len(words(sentence) & words(s.text)) for s in others)
        assert len(words(sentence) & words(next(s for s in conv.sources if s.id == sid).text)) == fewest


def test_planted_claims_keep_a_page_that_says_them() -> None:
    conv = conversation()
    report = sr.write_report(conv, conv.midpoint, miscite_every=1)  # every page sentence miscited
    for claim in sr.claims_for_topic(TOPIC):
        source = sr._claim_source(claim, conv.sources)
        assert source is not None and f"{claim['statement']} [S{source.id}]" in report
