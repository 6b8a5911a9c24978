"""Who was asked: which model families had a report on a finding's topics (issue 29.7).

Why: with one family per topic (a common plan, and the seed's), "single-source — may be model bias"
says nothing about bias — no other family was asked the question — and a family that shows "none" in
the agreement matrix may never have been asked. So every finding and divergence records its *topics*
(those of the counted reports that hold it; of the reports that make it when none counts) and the
families *asked* (those of the counted reports on any of those topics), and the labels say which:

* a family holds a side, was asked and took no side ("no side"), or was not asked ("not asked");
* a consequential single-source finding reads "single-source — may be model bias" only when another
  family was asked; otherwise "single-source — only one family was asked".

A report's topic is its front matter's `topic`; only counted reports make a family asked (an excluded
report's family answered, but its answer does not count).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from research_dispatch.synthesis.count.classify import FLAG, Cluster, Divergence
from research_dispatch.synthesis.read.inputs import Counting

ONLY_ONE_ASKED = "single-source — only one family was asked"
NOT_ASKED = "not asked"
NO_SIDE = "no side"


@dataclass(frozen=True)
class Asked:
    """Each report's topic, and the families of the counted reports on each topic."""

    topic_of: Mapping[str, str]
    families_on: Mapping[str, frozenset[str]]

    @classmethod
    def of(cls, reports: Iterable[tuple[str, Counting]]) -> Asked:
        """From (topic, counting) of every report the synthesis read."""
        topic_of: dict[str, str] = {}
        families_on: dict[str, set[str]] = {}
        for topic, counting in reports:
            topic_of[counting.stem] = topic
            if counting.counted:
                families_on.setdefault(topic, set()).update(counting.families)
        return cls(topic_of, {topic: frozenset(families) for topic, families in families_on.items()})

    def topics(self, reports: Iterable[str]) -> list[str]:
        return sorted({self.topic_of[r] for r in reports if r in self.topic_of})

    def families(self, topics: Iterable[str]) -> list[str]:
        """The families asked about any of these topics."""
        return sorted({f for topic in topics for f in self.families_on.get(topic, frozenset())})


def mark(clusters: list[Cluster], divergences: list[Divergence], asked: Asked,
         members_report: Mapping[str, str]) -> None:
    """Set `topics` and `asked` on every cluster and divergence (in place). `members_report` maps a claim
    key to its report (the topics of a cluster no counted report holds are those of its claims')."""
    by_index = {c.index: c for c in clusters}
    for cluster in clusters:
        holders = cluster.reports or sorted({members_report[k] for k in cluster.members})
        cluster.topics = asked.topics(holders)
        cluster.asked = asked.families(cluster.topics)
    for divergence in divergences:
        holders = [r for side in divergence.sides for r in side.reports] + divergence.ambivalent_reports
        divergence.topics = asked.topics(holders)
        divergence.asked = asked.families(divergence.topics)
        for side in divergence.sides:  # a side's topics are the divergence's: one decision, one question
            by_index[side.cluster].topics, by_index[side.cluster].asked = divergence.topics, divergence.asked


def recorded(topics: Iterable[str], asked: Iterable[str]) -> tuple[str, ...] | None:
    """The families asked, or None when the ledger does not record who was (no topics: an older ledger)."""
    return tuple(sorted(asked)) if list(topics) else None


def single_source_label(families: Iterable[str], asked: Iterable[str] | None) -> str:
    """What a consequential single-source finding is called: "may be model bias" only when a family other
    than its own was asked (`asked` None: not recorded, as in older ledgers, and then the old label)."""
    if asked is None:
        return FLAG
    return FLAG if set(asked) - set(families) else ONLY_ONE_ASKED
