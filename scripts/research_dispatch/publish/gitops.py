"""Git for the publisher: commits built off to the side, foreign commits detected, pushes with a lease.

Why plumbing and not `git add`/`git commit`: the working tree, the index and HEAD belong to the user.
Refresh commits are built in a temporary index (`GIT_INDEX_FILE`) seeded from the base commit's tree;
blobs are hashed from working-tree files at *computed* paths only, so nothing else in the working tree
can slip into a commit and nothing the user staged is disturbed.

Why a lease: the push names the exact remote sha that was inspected for foreign commits
(`--force-with-lease=refs/heads/B:<sha>`, or `B:` for "must not exist"), so anything pushed in
between makes git refuse the push instead of overwriting it.

Why auth through the environment: with `GITHUB_TOKEN` and an https remote, git gets the token as an
`http.<url>.extraheader` through `GIT_CONFIG_COUNT/KEY/VALUE`, which lives only in the child's
environment — never in `.git/config`, never in argv (visible in `ps`), never in a log.
"""

from __future__ import annotations

import base64
import datetime as dt
import os
import re
import subprocess
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from research_dispatch.core.errors import BadInput, PublishError
from research_dispatch.core.redact import KEY_VARIABLES, redact, register_env, register_secrets

ZERO_SHA = "0" * 40
NETWORK_TIMEOUT_S = 300
LOCAL_TIMEOUT_S = 120

# GIT_* variables that may pass through: transport and config-location knobs a user or runner may
# rely on, and fixed dates (tests, reproducible builds). Everything else GIT_* (GIT_DIR, GIT_INDEX_FILE,
# GIT_WORK_TREE, GIT_CONFIG_COUNT, GIT_TRACE*, ...) could redirect or log what we do, so it is dropped.
_KEEP_GIT_VARS = frozenset({
    "GIT_SSH", "GIT_SSH_COMMAND", "GIT_SSH_VARIANT", "GIT_ASKPASS", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_NOSYSTEM",
    "GIT_EXEC_PATH", "GIT_AUTHOR_DATE", "GIT_COMMITTER_DATE", "GIT_SSL_CAINFO", "GIT_SSL_NO_VERIFY",
})
# A lost race, as git says it: the lease or the fast-forward check failed on our side (`[rejected]`), or
# the two pushes passed both and the remote's ref transaction refused the later one (`[remote rejected]
# … cannot lock ref …: reference already exists` when both created the branch, `… is at X but expected
# Y` when both moved it). A hook or a protection rule refusing the push is no race (`remote rejected`
# with another reason) and stays an error.
_REJECTED = re.compile(r"\[rejected\]|stale info|fetch first|non-fast-forward"
                       r"|\[remote rejected\].*(?:cannot lock ref|reference already exists|but expected"
                       r"|incorrect old value|failed to update ref)")
_URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/@\s]*@")


@dataclass(frozen=True)
class Identity:
    """Who the bot commits as; also how its own commits are told apart from anyone else's."""

    name: str
    email: str

    def owns(self, email: str) -> bool:
        return email.strip().lower() == self.email.strip().lower()


@dataclass(frozen=True)
class CommitInfo:
    sha: str
    tree: str
    parents: tuple[str, ...]
    author_name: str
    author_email: str
    committer_name: str
    committer_email: str
    message: str


@dataclass(frozen=True)
class FileSpec:
    """One file of a commit, by its path from the repository top level (working tree and tree alike).

    `blob`: the content's object (written beforehand, e.g. by `hash_texts`); None hashes the working-tree
    file at that path. `delete`: remove the path from the tree instead."""

    tree_path: str
    blob: str | None = None
    delete: bool = False


@dataclass(frozen=True)
class CommitSpec:
    files: tuple[FileSpec, ...]
    message: str


class LeaseRejected(PublishError):
    """The remote branch is no longer at the sha we leased: someone pushed in between."""


def strip_userinfo(text: str) -> str:
    """Drop `user:password@` from any URL in a message before it is shown."""
    return _URL_USERINFO.sub(r"\1", text)


def auth_config_env(url: str, token: str) -> dict[str, str]:
    """Environment that makes git send the token to this https remote, and to nothing else.

    The first entry (an empty value) resets any extraheader persisted by actions/checkout, so git does
    not send two Authorization headers (which GitHub rejects).
    """
    parts = urlsplit(url)
    if parts.scheme.lower() != "https" or not parts.hostname or not token:
        return {}
    host = parts.netloc.rsplit("@", 1)[-1]
    key = f"http.https://{host}/.extraheader"
    basic = base64.b64encode(f"x-access-token:{token}".encode()).decode("ascii")
    return {"GIT_CONFIG_COUNT": "2", "GIT_CONFIG_KEY_0": key, "GIT_CONFIG_VALUE_0": "",
            "GIT_CONFIG_KEY_1": key, "GIT_CONFIG_VALUE_1": f"AUTHORIZATION: basic {basic}"}


class Git:
    """Runs the git CLI in `repo` with argument lists (never a shell) and a controlled environment."""

    def __init__(self, repo: Path, env: Mapping[str, str], identity: Identity) -> None:
        self.repo = repo
        self.identity = identity
        register_env(env)
        child = {k: v for k, v in env.items()
                 if (not k.startswith("GIT_") or k in _KEEP_GIT_VARS) and k not in KEY_VARIABLES}
        for name in ("PATH", "HOME", "SYSTEMROOT", "TMPDIR"):
            if name not in child and name in os.environ:
                child[name] = os.environ[name]
        child.update({"LC_ALL": "C", "LANG": "C", "GIT_TERMINAL_PROMPT": "0", "GCM_INTERACTIVE": "never",
                      "GIT_AUTHOR_NAME": identity.name, "GIT_AUTHOR_EMAIL": identity.email,
                      "GIT_COMMITTER_NAME": identity.name, "GIT_COMMITTER_EMAIL": identity.email})
        self._env = child
        self._auth: dict[str, str] = {}
        self._prefix: str | None = None

    # -- running --------------------------------------------------------------------------------
    def use_token_for(self, url: str, token: str) -> bool:
        """Authenticate network commands to `url` with `token` (https only). True if it applies."""
        self._auth = auth_config_env(url, token)
        if self._auth:
            register_secrets([token, self._auth["GIT_CONFIG_VALUE_1"].split()[-1]])
        return bool(self._auth)

    def clean(self, text: str) -> str:
        """Redact keys and URL credentials from git output before it goes anywhere."""
        return strip_userinfo(redact(text))

    def run(self, *args: str, input: str | None = None, check: bool = True, network: bool = False,
            extra_env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        env = {**self._env, **(extra_env or {}), **(self._auth if network else {})}
        # Hooks could run arbitrary code with our environment (and the auth header): none run here.
        command = ["git", "-c", "core.hooksPath=/dev/null", "-c", "color.ui=never", *args]
        try:
            proc = subprocess.run(command, cwd=self.repo, env=env, input=input, capture_output=True, text=True,
                                  encoding="utf-8", errors="replace", check=False,
                                  timeout=NETWORK_TIMEOUT_S if network else LOCAL_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise PublishError(f"git {args[0]} timed out") from None
        except FileNotFoundError:
            raise PublishError("the git executable was not found on PATH") from None
        if check and proc.returncode != 0:
            detail = self.clean((proc.stderr or proc.stdout).strip())
            lines = [line for line in detail.splitlines() if line.strip()][-6:]
            raise PublishError(f"git {args[0]} failed (exit {proc.returncode}): " + " | ".join(lines))
        return proc

    def out(self, *args: str, **kwargs: object) -> str:
        return self.run(*args, **kwargs).stdout.strip()  # type: ignore[arg-type]

    # -- repository facts -----------------------------------------------------------------------
    def check_repository(self) -> None:
        proc = self.run("rev-parse", "--is-inside-work-tree", check=False)
        if proc.returncode != 0 or proc.stdout.strip() != "true":
            raise BadInput("not a git working tree (publish commits to a branch of this repository)",
                           path=str(self.repo))

    @property
    def prefix(self) -> str:
        """The --repo directory relative to the repository top level ('' or 'sub/dir/')."""
        if self._prefix is None:
            self._prefix = self.out("rev-parse", "--show-prefix")
        return self._prefix

    def tree_path(self, worktree_rel: str) -> str:
        return f"{self.prefix}{worktree_rel}"

    def rev(self, ref: str) -> str | None:
        proc = self.run("rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}", check=False)
        sha = proc.stdout.strip()
        return sha if proc.returncode == 0 and sha else None

    def commit_date(self, rev: str) -> dt.date | None:
        """The committer date of a commit (UTC), or None when it cannot be read."""
        done = self.run("log", "-1", "--format=%ct", rev, check=False)
        stamp = done.stdout.strip()
        if done.returncode != 0 or not stamp.isdigit():
            return None
        return dt.datetime.fromtimestamp(int(stamp), dt.timezone.utc).date()

    def remote_url(self, remote: str) -> str | None:
        proc = self.run("remote", "get-url", remote, check=False)
        return proc.stdout.strip() if proc.returncode == 0 and proc.stdout.strip() else None

    def checked_out_branches(self) -> set[str]:
        proc = self.run("worktree", "list", "--porcelain", check=False)
        return {line.split(" ", 1)[1].strip() for line in proc.stdout.splitlines() if line.startswith("branch ")}

    def blob_shas(self, commit: str, tree_paths: Sequence[str]) -> dict[str, str]:
        """{tree path: blob sha} for those paths that exist in `commit`."""
        if not tree_paths:
            return {}
        out = self.run("ls-tree", "-r", "-z", "--full-tree", commit, "--", *tree_paths).stdout
        result: dict[str, str] = {}
        for entry in out.split("\0"):
            if not entry:
                continue
            meta, _, path = entry.partition("\t")
            _mode, kind, sha = meta.split()
            if kind == "blob":
                result[path] = sha
        return result

    def hash_files(self, tree_paths: Sequence[str], *, write: bool) -> list[str]:
        """Blob shas of working-tree files (with the repository's filters, as `git add` would).

        Paths are relative to the top level: `hash-object` runs there, and `--stdin-paths` input is not
        adjusted for the directory git was started in.
        """
        if not tree_paths:
            return []
        args = ["hash-object", *(["-w"] if write else []), "--stdin-paths"]
        shas = self.out(*args, input="\n".join(tree_paths) + "\n").split()
        if len(shas) != len(tree_paths):
            raise PublishError("git hash-object returned an unexpected number of objects")
        return shas

    def hash_texts(self, texts: Sequence[str], *, write: bool) -> list[str]:
        """Blob shas of exact texts (no filters: the commit holds these bytes, as assessed)."""
        if not texts:
            return []
        with tempfile.TemporaryDirectory(prefix="research-dispatch-blobs-") as tmp:
            paths = []
            for index, text in enumerate(texts):
                path = Path(tmp) / f"{index}"
                path.write_bytes(text.encode("utf-8"))
                paths.append(str(path))
            args = ["hash-object", *(["-w"] if write else []), "--no-filters", "--stdin-paths"]
            shas = self.out(*args, input="\n".join(paths) + "\n").split()
        if len(shas) != len(texts):
            raise PublishError("git hash-object returned an unexpected number of objects")
        return shas

    def read_blob(self, commit: str, tree_path: str) -> str | None:
        """A blob's exact text (bytes decoded as UTF-8, no newline translation), or None if absent or not
        UTF-8."""
        command = ["git", "-c", "core.hooksPath=/dev/null", "cat-file", "blob", f"{commit}:{tree_path}"]
        try:
            proc = subprocess.run(command, cwd=self.repo, env=self._env, capture_output=True, check=False,
                                  timeout=LOCAL_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired):
            raise PublishError("git cat-file failed") from None
        if proc.returncode != 0:
            return None
        try:
            return proc.stdout.decode("utf-8")
        except UnicodeDecodeError:
            return None

    def commits_between(self, base: str, tip: str) -> list[CommitInfo]:
        """Commits reachable from tip but not from base, oldest first."""
        fmt = "%H%x00%T%x00%P%x00%an%x00%ae%x00%cn%x00%ce%x00%B%x1e"
        out = self.run("log", "--reverse", f"--format={fmt}", f"{base}..{tip}", "--").stdout
        commits = []
        for record in out.split("\x1e"):
            record = record.lstrip("\n")
            if not record:
                continue
            sha, tree, parents, an, ae, cn, ce, message = record.split("\x00", 7)
            commits.append(CommitInfo(sha=sha, tree=tree, parents=tuple(parents.split()), author_name=an,
                                      author_email=ae, committer_name=cn, committer_email=ce,
                                      message=message.rstrip("\n")))
        return commits

    def foreign_commits(self, base: str, tip: str) -> list[CommitInfo]:
        """Commits on the branch (since it left base) that the bot did not both author and commit."""
        return [c for c in self.commits_between(base, tip)
                if not (self.identity.owns(c.author_email) and self.identity.owns(c.committer_email))]

    # -- building -------------------------------------------------------------------------------
    def build_chain(self, base: str, specs: Iterable[CommitSpec]) -> list[str]:
        """Create one commit per spec on top of base in a temporary index; return their shas.

        Writes objects only (blobs, trees, commits); no ref, no index, no working-tree file changes.
        """
        shas: list[str] = []
        with tempfile.TemporaryDirectory(prefix="research-dispatch-index-") as tmp:
            index = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
            self.run("read-tree", base, extra_env=index)
            parent = base
            for spec in specs:
                hashed = iter(self.hash_files([f.tree_path for f in spec.files if f.blob is None and not f.delete],
                                              write=True))
                for file in spec.files:
                    if file.delete:
                        self.run("update-index", "--force-remove", "--", file.tree_path, extra_env=index)
                        continue
                    blob = file.blob or next(hashed)
                    self.run("update-index", "--add", "--cacheinfo", f"100644,{blob},{file.tree_path}",
                             extra_env=index)
                tree = self.out("write-tree", extra_env=index)
                message = spec.message if spec.message.endswith("\n") else spec.message + "\n"
                parent = self.out("commit-tree", "--no-gpg-sign", tree, "-p", parent, "-F", "-", input=message)
                shas.append(parent)
        return shas

    def same_chain(self, base: str, tip: str, ours: Sequence[str]) -> bool:
        """Does the branch at `tip` already hold exactly these commits' trees and messages on `base`?"""
        theirs = self.commits_between(base, tip)
        if len(theirs) != len(ours) or not theirs or theirs[0].parents != (base,):
            return False
        mine = self.commits_between(base, ours[-1])
        return [(c.tree, c.message) for c in theirs] == [(c.tree, c.message) for c in mine]

    def update_ref(self, ref: str, new: str, old: str | None, reason: str) -> None:
        self.run("update-ref", "-m", reason, ref, new, old or ZERO_SHA)

    # -- remote ---------------------------------------------------------------------------------
    def ls_remote_heads(self, remote: str, branches: Sequence[str]) -> dict[str, str]:
        out = self.run("ls-remote", "--heads", remote, *[f"refs/heads/{b}" for b in branches], network=True).stdout
        heads: dict[str, str] = {}
        for line in out.splitlines():
            sha, _, ref = line.partition("\t")
            heads[ref.strip().removeprefix("refs/heads/")] = sha.strip()
        return heads

    def fetch(self, remote: str, refspecs: Sequence[str]) -> None:
        """Fetch refspecs; a shallow clone (CI's fetch-depth 1) is unshallowed first.

        In a shallow clone the base commit has no known parents, so `base..branch` would list the base's
        own history as commits on the branch, and humans who committed to main would look like editors
        of the refresh branch.
        """
        shallow = self.out("rev-parse", "--is-shallow-repository") == "true"
        self.run("fetch", "--quiet", "--no-tags", "--no-recurse-submodules", *(["--unshallow"] if shallow else []),
                 remote, *refspecs, network=True)

    def push_with_lease(self, remote: str, sha: str, branch: str, expected: str | None) -> None:
        """Push sha to the branch only if the remote still has `expected` there (None: must not exist)."""
        ref = f"refs/heads/{branch}"
        lease = f"--force-with-lease={ref}:{expected or ''}"
        proc = self.run("push", "--porcelain", "--no-verify", lease, remote, f"{sha}:{ref}", network=True,
                        check=False)
        if proc.returncode == 0:
            return
        detail = self.clean(f"{proc.stdout}\n{proc.stderr}")
        if _REJECTED.search(detail):
            raise LeaseRejected(f"the remote branch {branch} moved since it was inspected; push refused")
        lines = [line for line in detail.splitlines() if line.strip()][-6:]
        raise PublishError(f"git push failed (exit {proc.returncode}): " + " | ".join(lines))
