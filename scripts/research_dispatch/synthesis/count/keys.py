"""Stable cluster and divergence keys, carried over from the previous ledger.

A cluster is the same finding across runs when it keeps claims (unchanged reports keep their claim
keys) or, failing that, when it has the same *base*: `<layer>/<pick>` for a recommendation,
`<layer>/<first content words>` otherwise. Each new cluster takes the key of the old cluster it
matches best (one to one, greedily, in a deterministic order); a cluster with no match gets its base,
suffixed `-2`, `-3`, … on collision. This is what lets the diff say "lost support" rather than
"dropped + new" when a report changes, and what keeps keys identical on an unchanged re-run.

Clusters with counted support are keyed first, and matched by their counted claims, so that a report
excluded from support cannot change the key of a counted finding. A divergence is keyed after its
sides: `divergence/<the smallest side key>`, stable while that side exists.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from research_dispatch.synthesis.common.text import slug, words_slug
from research_dispatch.synthesis.count.classify import Cluster, Divergence


def base_key(cluster: Cluster) -> str:
    layer = slug(cluster.layer_key, max_len=32)
    tail = slug(cluster.pick_key) if cluster.pick_key else words_slug(cluster.summary)
    return f"{layer}/{tail}"


def _old_clusters(old: dict[str, Any] | None) -> list[tuple[str, set[str], str]]:
    clusters = old.get("clusters") if isinstance(old, dict) else None
    out = []
    for item in clusters if isinstance(clusters, list) else []:
        if isinstance(item, dict) and isinstance(item.get("key"), str):
            members = item.get("members")
            keys = {m for m in members if isinstance(m, str)} if isinstance(members, list) else set()
            out.append((item["key"], keys, str(item.get("base") or "")))
    return out


def _unique(base: str, used: set[str]) -> str:
    key, n = base, 1
    while key in used:
        n += 1
        key = f"{base}-{n}"
    used.add(key)
    return key


def assign_cluster_keys(clusters: list[Cluster], old: dict[str, Any] | None,
                        counted_claims: set[str] | None = None) -> None:
    """Set `base` and `key` on every cluster (in place); counted clusters first (see the module doc)."""
    counted = counted_claims if counted_claims is not None else {k for c in clusters for k in c.members}
    taken: set[str] = set()
    _assign([c for c in clusters if c.reports], old, counted, taken)
    _assign([c for c in clusters if not c.reports], old, counted, taken)


def _assign(clusters: list[Cluster], old: dict[str, Any] | None, counted: set[str], taken: set[str]) -> None:
    for cluster in clusters:
        cluster.base = base_key(cluster)
    previous = _old_clusters(old)
    owner: dict[str, list[int]] = {}
    for j, (_key, members, _base) in enumerate(previous):
        for member in members:
            owner.setdefault(member, []).append(j)
    by_base: dict[str, list[int]] = {}
    for j, (_key, _members, base) in enumerate(previous):
        by_base.setdefault(base, []).append(j)
    pairs = []
    for position, cluster in enumerate(clusters):
        own = [m for m in cluster.members if m in counted] or cluster.members
        overlap = Counter(j for member in own for j in owner.get(member, ()))
        for j in set(overlap) | set(by_base.get(cluster.base, ())):
            same_base = previous[j][2] == cluster.base
            pairs.append((-overlap.get(j, 0), not same_base, previous[j][0], own[0], position, j))
    pairs.sort()
    taken_old = {j for j, (key, _m, _b) in enumerate(previous) if key in taken}
    used = set(taken)
    for _neg, _not_base, old_key, _first, position, j in pairs:
        cluster = clusters[position]
        if cluster.key or j in taken_old or old_key in used:
            continue
        cluster.key = old_key
        taken_old.add(j)
        used.add(old_key)
    for cluster in sorted((c for c in clusters if not c.key),
                          key=lambda c: (c.base, ([m for m in c.members if m in counted] or c.members)[0])):
        cluster.key = _unique(cluster.base, used)
    taken.update(used)


def assign_divergence_keys(divergences: list[Divergence], clusters: list[Cluster]) -> None:
    by_index = {c.index: c for c in clusters}
    used: set[str] = set()
    named = sorted(divergences, key=lambda d: sorted(by_index[i].key for i in d.clusters))
    for divergence in named:
        divergence.key = _unique("divergence/" + min(by_index[i].key for i in divergence.clusters), used)
        for index in divergence.clusters:
            by_index[index].divergence = divergence.key
