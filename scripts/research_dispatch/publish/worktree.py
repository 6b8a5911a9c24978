"""The checkout a local `run` starts from, and leaves as it found it.

`run` works in the repository's working tree: the overlay brings the refresh branch's reports
(`publish/accumulate.py`) and its synthesis (`bring_synthesis`) into it, the legs and the synthesis
write there, and publishing commits from it to the local refresh branch — never to the branch that is
checked out. A result left behind in the checkout is a trap: `git add -A` puts the research on the base
branch without review, and the next run finds "nothing to publish". So once the refresh branch holds
the results, the checkout is put back (`put_back`).

Why the branch's synthesis comes in too: the synthesis replays the answers of its previous ledger per
report (`synthesis/cache.py`). Put back after every run, the working tree would otherwise offer the base's
ledger as the previous one, and an unchanged re-run could not write the branch's files again byte for
byte: the branch would be rewritten though nothing changed. Only the synthesis' own generated files come
in (document, ledger, call log), and only over the checkout's own version of them (or none): a file
that differs from HEAD is someone's work and is left alone. The methodology document never comes in:
it is the team's prose around a generated table, and the base's prose may be newer than the branch's.

What `put_back` restores, and why it never loses work: a path under the research or framework directory
(or the methodology document) that differs from HEAD is put back only when the refresh branch's new tip
holds exactly its content (or, for a file the refresh removed, lacks it too) — so the work is in a
commit. It goes back to HEAD's version (or is removed when HEAD has none); the methodology document
goes back to what it held when the run began (uncommitted prose edits of the team stay). Any other
difference (a person's notes in research/, a report the branch does not hold) is left and listed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from research_dispatch.config.settings import Settings
from research_dispatch.core.fsio import confined, write_atomic
from research_dispatch.publish.accumulate import BranchView
from research_dispatch.publish.gitops import Git


@dataclass(frozen=True)
class Start:
    """What the checkout held when the run began, where `put_back` restores it rather than HEAD's."""

    methodology: bytes | None


@dataclass
class PutBack:
    """What `put_back` did: paths restored to the checkout's version, and differences it left."""

    restored: list[str] = field(default_factory=list)
    left: list[str] = field(default_factory=list)


def capture(repo: Path, settings: Settings) -> Start:
    """The methodology document as the run found it (None when absent or not a plain file)."""
    path = repo / settings.methodology_path
    try:
        return Start(methodology=None if path.is_symlink() else path.read_bytes())
    except OSError:
        return Start(methodology=None)


def _text(repo: Path, rel: str) -> str | None:
    """A working-tree file's text as publish commits it (UTF-8, exact), None if absent or unreadable."""
    path = repo / rel
    if path.is_symlink() or not path.is_file():
        return None
    try:
        return path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def _blobs(git: Git, repo: Path, rels: list[str]) -> dict[str, str | None]:
    """{path: blob sha of the working-tree file as publish would commit it, or None when absent}."""
    texts = {rel: _text(repo, rel) for rel in rels}
    present = [rel for rel, text in texts.items() if text is not None]
    shas = dict(zip(present, git.hash_texts([texts[rel] or "" for rel in present], write=False), strict=True))
    return {rel: shas.get(rel) for rel in rels}


def _in_commit(git: Git, commit: str | None, rels: list[str]) -> dict[str, str | None]:
    """{path: blob sha in `commit`, or None} (every path None when there is no commit)."""
    if commit is None:
        return dict.fromkeys(rels)
    found = git.blob_shas(commit, [git.tree_path(rel) for rel in rels])
    return {rel: found.get(git.tree_path(rel)) for rel in rels}


def bring_synthesis(repo: Path, settings: Settings, view: BranchView | None) -> list[str]:
    """Write the refresh branch's synthesis files over the checkout's own (module docstring); returns the
    paths brought. Nothing when the branch holds no synthesis. Call under the repository lock."""
    if view is None or not view.tips:
        return []
    git = view.git
    ledger = settings.ledger_relpath
    tip = next((t.sha for t in view.tips if git.read_blob(t.sha, git.tree_path(ledger)) is not None), None)
    if tip is None:
        return []
    rels = [settings.document_relpath, ledger, settings.synthesis_calls_relpath]
    head = _in_commit(git, git.rev("HEAD"), rels)
    worktree = _blobs(git, repo, rels)
    on_branch = _in_commit(git, tip, rels)
    brought = []
    for rel in rels:
        if on_branch[rel] is None or worktree[rel] == on_branch[rel] or worktree[rel] != head[rel]:
            continue  # the branch lacks it, the checkout already holds it, or someone's work is there
        path = confined(repo, rel)
        if path.is_symlink():
            continue
        text = git.read_blob(tip, git.tree_path(rel))
        if text is None:
            continue
        write_atomic(path, text)
        brought.append(rel)
    return brought


def _changed(git: Git, settings: Settings) -> list[str]:
    """Paths under the research and framework directories, and the methodology document, that differ
    from HEAD in the working tree (untracked files included), relative to the repository directory."""
    specs = [settings.research_dir, settings.framework_dir, settings.methodology_path]
    out = git.run("status", "--porcelain=v1", "-z", "-uall", "--no-renames", "--", *specs).stdout
    prefix = git.prefix
    paths = []
    for entry in out.split("\0"):
        if len(entry) > 3 and entry[3:].startswith(prefix):
            paths.append(entry[3 + len(prefix):])
    return sorted(set(paths))


def put_back(repo: Path, settings: Settings, git: Git, tip: str, start: Start,
             earlier: list[str] | None = None) -> PutBack:
    """Put the checkout back once the refresh branch's tip `tip` holds the results (module docstring).
    `earlier`: the tips the branch had when the run began — what the overlay brought from them is a
    copy of a commit too (a synthesis the refresh then removed, say). Call under the repository lock."""
    result = PutBack()
    rels = _changed(git, settings)
    if not rels:
        return result
    worktree = _blobs(git, repo, rels)
    held = [_in_commit(git, commit, rels) for commit in [tip, *(earlier or [])]]
    head = _in_commit(git, git.rev("HEAD"), rels)
    from_head: list[str] = []
    for rel in rels:
        path = repo / rel
        if rel == settings.methodology_path and capture(repo, settings) == start:
            continue  # as the run found it (the team's uncommitted prose, say): nothing to put back
        removed = worktree[rel] is None and held[0][rel] is None and not path.is_symlink()
        if not removed and (worktree[rel] is None or all(worktree[rel] != commit[rel] for commit in held)):
            result.left.append(rel)  # in no commit of the branch: someone's work, never touched
            continue
        if rel == settings.methodology_path:
            if start.methodology is None:
                path.unlink(missing_ok=True)
            else:
                write_atomic(confined(repo, rel), start.methodology)
        elif head[rel] is not None:
            from_head.append(rel)
        else:
            path.unlink(missing_ok=True)
        result.restored.append(rel)
    if from_head:  # pathspecs are relative to the repository directory git runs in; the index is left alone
        git.run("restore", "--source=HEAD", "--worktree", "--", *from_head)
    return result
