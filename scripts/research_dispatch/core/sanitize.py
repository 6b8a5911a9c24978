"""Sanitising untrusted text (web pages, model output) before it is shown to a model, written into a
report, or placed in a pull-request body.

One place for these rules so the report writer, the search tools and the PR body cannot drift apart.
"""

from __future__ import annotations

import html.entities
import re

# C0/C1 controls except tab and newline; bidi embeddings/overrides/isolates; zero-width and BOM.
_INVISIBLE = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f"
    "\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb]"
)
_HTML_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_HTML_COMMENT_FRAGMENT = re.compile(r"<!--|--!?>")
# An `@` GitHub could link: before a letter or digit, not after one (an e-mail address `a@b.org` is no
# mention). Whatever precedes it otherwise — `/`, another `@`, a backtick, `*`, `\\`, `>` — it may be one.
_MENTION_AT = re.compile(r"(?<![A-Za-z0-9])@(?=[A-Za-z0-9])")
# Character references a Markdown renderer turns into `@` (`&#64;`, `&#x40;`, `&commat;`, leading zeros).
_AT_REFERENCE = re.compile(r"&(?:#0*64|#[xX]0*40|commat);")
NEUTRAL_AT = "\uff20"  # FULLWIDTH COMMERCIAL AT: reads as `@`, and GitHub's mention pattern matches only ASCII `@`
# The runner's two command parsers: v2 takes a line that starts `::` once trimmed, v1 finds `##[` anywhere.
# The runner splits output on `\n`, `\r` and `\r\n`, so a `\r` starts a line too.
_WORKFLOW_COMMAND = re.compile(r"(?:^|(?<=\r))([^\S\r\n]*)::", re.MULTILINE)
_LEGACY_COMMAND = re.compile(r"##\[")
_WRAPPER_TAG = re.compile(r"<(\s*/?\s*)(source|tool_result|untrusted)", re.IGNORECASE)
_EXPRESSION = re.compile(r"\$\{\{")
# What GitHub acts on in a rendered body besides mentions (its docs: "Autolinked references and URLs",
# "Linking a pull request to an issue"): issue references `#26`, `GH-26`, `owner/repo#26` — with a closing
# keyword (`fixes #1`) merging closes the issue, and across repositories a backlink is posted there every
# cycle —, autolinked URLs (`https://…`, `www.…`), Markdown links and images (`[t](u)`, `![a](u)`, `[t][r]`,
# `[r]: u`) and math (`$…$`, `$$…$$`, a `math` fence). Each is defused by a look-alike of the one character
# it needs, like the mention's `@`: no context is needed, so a code span, a table cell or an escape cannot
# bring it back, and the text still reads as written.
NEUTRAL_HASH = "\uff03"  # FULLWIDTH NUMBER SIGN: `＃26` is no issue reference
NEUTRAL_HYPHEN = "\u2011"  # NON-BREAKING HYPHEN: `GH‑26` is none either
NEUTRAL_BRACKET = "\uff3d"  # FULLWIDTH RIGHT SQUARE BRACKET: `[t］(u)` is no link, `![a］(u)` no image
NEUTRAL_COLON = "\uff1a"  # FULLWIDTH COLON: `https：//x.org` is no autolink
NEUTRAL_DOT = "\uff0e"  # FULLWIDTH FULL STOP: nor is `www．x.org`
NEUTRAL_DOLLAR = "\uff04"  # FULLWIDTH DOLLAR SIGN: `＄x＄` is no math
# A character reference the renderer decodes (numeric, or named with its `;`), before the rules look for
# the characters: `&#35;1` renders `#1`. Decoded when it stands for printable ASCII other than `&<>`.
_CHAR_REFERENCE = re.compile(r"&(?:#([0-9]{1,7})|#[xX]([0-9a-fA-F]{1,6})|([A-Za-z][A-Za-z0-9]{1,31}));")
_KEPT_REFERENCE = "&<>"
_NUMERIC_REFERENCE = re.compile(r"&#[0-9]{1,7};")
_ISSUE_HASH = re.compile(r"(&#[0-9]{1,7};)|#(?=[0-9])")
_GH_PREFIX = re.compile(r"(?i)(gh)\\?-(?=[0-9])")
_LINK_BRACKET = re.compile(r"\\?\](?=[(\[:])")
_URL_SCHEME = re.compile(r"(?i)(https?|ftp)\\?:(?=\\?/\\?/)")
_WWW = re.compile(r"(?i)(www)\\?\.")
_MATH_FENCE = re.compile(r"(?i)((?:`{3,}|~{3,})[ \t]*)math")  # anywhere: a fence may open in a quote or a list


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
    """Make every `@name` GitHub could link (a user or `@org/team`) ping nobody, wherever it stands.

    Why not wrap it in backticks (the old guard): inside an existing code span the new backticks close
    that span and open the mention to the renderer, and a fragment's backticks can pair with another
    fragment's once a body is assembled. So the `@` itself is replaced by `NEUTRAL_AT`, which needs no
    context: a code span, a table cell, `@@x`, `/@x` and an entity-spelled `&#64;x` (decoded first, as
    the renderer would) are all inert the same way, and the text still reads as written."""
    return _MENTION_AT.sub(NEUTRAL_AT, _AT_REFERENCE.sub("@", text))


def neutralise_workflow_commands(text: str) -> str:
    """Break what the Actions runner would run if this text reached the job log: a line that starts `::`
    after its leading whitespace (thin space between the colons) and `##[` anywhere (`##\u2009[`)."""
    text = _WORKFLOW_COMMAND.sub(lambda m: f"{m.group(1)}:\u2009:", text)
    return _LEGACY_COMMAND.sub("##\u2009[", text)


def neutralise(text: str) -> str:
    """THE neutraliser for untrusted text that GitHub renders or the runner reads — the PR body
    (`for_pr_body`, `publish.prbody`), the claim diff and every line a command prints (`for_log`): no
    mention pings anyone, no line is a workflow command. Idempotent, and text without `@`, `&`, `::` or
    `##[` is returned unchanged. `tests/test_neutralise.py` checks it against a CommonMark renderer,
    GitHub's mention pattern and the runner's two command parsers."""
    return neutralise_mentions(neutralise_workflow_commands(text))


def _decode(match: re.Match[str]) -> str:
    decimal, hexadecimal, name = match.groups()
    if name is not None:
        char = html.entities.html5.get(name + ";", "")
    else:
        code = int(decimal) if decimal is not None else int(hexadecimal, 16)
        char = chr(code) if 0 < code < 0x110000 else ""
    return char if len(char) == 1 and " " <= char <= "~" and char not in _KEPT_REFERENCE else match.group(0)


def decode_references(text: str) -> str:
    """Character references of printable ASCII decoded as a renderer decodes them, until none is left (a
    decoded one can complete another: `&#3&#53;;` is `&#35;`), so the rules below see what GitHub sees."""
    while True:
        decoded = _CHAR_REFERENCE.sub(_decode, text)
        if decoded == text:
            return text
        text = decoded


def inert_markdown(text: str) -> str:
    """THE guard for untrusted text in Markdown that GitHub renders (the PR body, a job summary): after
    `neutralise` (no mention, no workflow command), no issue reference or closing keyword (`#1`, `GH-7`,
    `owner/repo#2`: a look-alike `#` or hyphen), no Markdown link, image or reference definition (the `]`
    of `](`, `][`, `]:`), no autolink (`https://`, `www.`), no math (`$`, a `math` fence). Character
    references of ASCII are decoded first (they render as the character); backslash escapes are looked
    through. Idempotent. `tests/test_neutralise.py` renders the result (CommonMark) and reads it with
    GitHub's reference, autolink and mention patterns."""
    text = neutralise(decode_references(text))
    text = _ISSUE_HASH.sub(lambda m: m.group(1) or NEUTRAL_HASH, text)
    text = _GH_PREFIX.sub(lambda m: f"{m.group(1)}{NEUTRAL_HYPHEN}", text)
    text = _LINK_BRACKET.sub(NEUTRAL_BRACKET, text)
    text = _URL_SCHEME.sub(lambda m: f"{m.group(1)}{NEUTRAL_COLON}", text)
    text = _WWW.sub(lambda m: f"{m.group(1)}{NEUTRAL_DOT}", text)
    text = _MATH_FENCE.sub(lambda m: f"{m.group(1)}text", text)
    return text.replace("$", NEUTRAL_DOLLAR)


def show_controls(text: str) -> str:
    """Every control, bidi and zero-width character but tab and newline written out as its escape
    (`\\x1b`, `\\u202e`): a file name or page text carrying OSC 52 (`ESC ] 52 ; c ; … BEL`, which writes the
    reader's clipboard), a CSI sequence (`ESC [` or the one-byte `\\x9b`: cursor moves, a cleared line) or a
    bidi override reaches a terminal as text, never as a command, and the reader sees that it was there."""
    return _INVISIBLE.sub(lambda m: f"\\x{ord(m.group(0)):02x}" if ord(m.group(0)) < 0x100
                          else f"\\u{ord(m.group(0)):04x}", text)


def for_log(text: str) -> str:
    """A line printed by a command (a terminal, or the job log in Actions): carriage returns become line
    breaks first (the runner starts a line at each), control characters are shown (`show_controls`), then
    `neutralise`."""
    return neutralise(show_controls(text.replace("\r\n", "\n").replace("\r", "\n")))


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
    """Any model- or web-derived text entering a PR body or a job summary: `inert_markdown`, and no HTML."""
    text = inert_markdown(for_report(text))
    return text.replace("<", "&lt;").replace(">", "&gt;")


def one_line(text: str, limit: int = 200) -> str:
    """Collapse to a single sanitised line (for tables, titles and log lines)."""
    text = " ".join(for_report(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
