"""Sanitising untrusted text (web pages, model output) before it is shown to a model, written into a
report, or placed in a pull-request body.

One place for these rules so the report writer, the search tools and the PR body cannot drift apart.
"""

from __future__ import annotations

import re

# C0/C1 controls except tab and newline; bidi embeddings/overrides/isolates; zero-width and BOM.
_INVISIBLE = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f"
    "\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb]"
)
_HTML_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_HTML_COMMENT_FRAGMENT = re.compile(r"<!--|--!?>")
_MENTION = re.compile(r"(?<![\w`/.@])@([A-Za-z0-9](?:[A-Za-z0-9-]{0,38})(?:/[A-Za-z0-9._-]+)?)")
_WORKFLOW_COMMAND = re.compile(r"^(\s*)::", re.MULTILINE)
_WRAPPER_TAG = re.compile(r"<(\s*/?\s*)(source|tool_result|untrusted)", re.IGNORECASE)
_EXPRESSION = re.compile(r"\$\{\{")


def strip_invisible(text: str) -> str:
    """Remove control, bidi-override and zero-width characters (keeps tab and newline)."""
    return _INVISIBLE.sub("", text.replace("\r\n", "\n").replace("\r", "\n"))


def strip_html_comments(text: str) -> str:
    """Remove HTML comments, and the stray delimiters of unterminated ones.

    A closed comment is removed with its content (a reader never sees it; nor will the file). An
    unterminated `<!--` loses only its delimiter: removing everything after it would let one hostile
    sequence silently delete the rest of a report, and leaving it would hide the rest on GitHub.
    """
    text = _HTML_COMMENT.sub("", text)
    return _HTML_COMMENT_FRAGMENT.sub("", text)


def neutralise_mentions(text: str) -> str:
    """Turn `@user` into `@\u200buser`-free inline code so GitHub does not ping anyone."""
    return _MENTION.sub(lambda m: f"`@{m.group(1)}`", text)


def neutralise_workflow_commands(text: str) -> str:
    """A line starting `::` is a workflow command when printed in Actions; break the prefix."""
    return _WORKFLOW_COMMAND.sub(lambda m: f"{m.group(1)}:\u2009:", text)


def neutralise_expressions(text: str) -> str:
    """`${{` has no meaning in a file, but never let one travel into YAML or a summary verbatim.

    Escaped as `$\\{\\{`, which Markdown renders as `${{`; not with an invisible joiner, which would
    itself be a hidden character in the text.
    """
    return _EXPRESSION.sub(r"$\\{\\{", text)


def for_model(text: str) -> str:
    """Web text shown to a model: no invisible characters, and no way to close our wrapper tags."""
    text = strip_invisible(text)
    return _WRAPPER_TAG.sub(lambda m: f"‹{m.group(1)}{m.group(2)}", text)


def for_report(text: str) -> str:
    """Model output written into a committed report."""
    text = strip_invisible(text)
    text = strip_html_comments(text)
    text = neutralise_workflow_commands(text)
    return neutralise_expressions(text)


def for_pr_body(text: str) -> str:
    """Any model- or web-derived text entering a PR body or a job summary."""
    text = for_report(text)
    text = neutralise_mentions(text)
    return text.replace("<", "&lt;").replace(">", "&gt;")


def one_line(text: str, limit: int = 200) -> str:
    """Collapse to a single sanitised line (for tables, titles and log lines)."""
    text = " ".join(for_report(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
