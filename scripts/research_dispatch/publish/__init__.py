"""The publish stage: one commit per changed report, one synthesis commit, a leased push, one PR.

Modules: `accumulate` (what the cycle branch holds for every planned leg, by the one rule of
`leg/state`, and the overlay into the working tree), `messages` (commit messages and trailers), `gitops`
(plumbing commits in a temporary index, foreign-commit detection, push with a lease), `prbody` (title
and sanitised, capped body), `pulls` (the PR through PyGithub with bounded retries), `preflight` (the
checks publishing needs, made by the publisher and, before any leg runs, by `run`), `command` (the flow,
its options and the CLI entry point).
"""

from research_dispatch.publish.command import PublishOptions, PublishResult, publish, publish_command, summary_lines

__all__ = ["PublishOptions", "PublishResult", "publish", "publish_command", "summary_lines"]
