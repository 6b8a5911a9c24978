"""The one neutraliser (`sanitize.neutralise`) as properties, checked the way GitHub and the runner read text.

Mentions: the neutralised text is rendered by a CommonMark renderer (markdown-it-py, with GFM tables),
and every rendered text node outside `code`, `pre` and `a` (where GitHub never links a mention) is
searched with GitHub's mention pattern — here a superset of it: an ASCII `@` followed by a letter or
digit and not preceded by a word character (html-pipeline's `MentionPattern` adds only lookaheads that
match fewer). Workflow commands: every line as the runner splits output (on `\\n` and `\\r`) must hold
no `##[` anywhere (its v1 parser looks for it at any index) and must not start with `::` once leading
whitespace is trimmed (the v2 parser). The generated texts are built from the pieces that bypassed the
old guard — code spans, `@@`, `/@`, `&#64;`/`&#x40;`/`&commat;`, backslashes, emphasis, raw HTML — mixed
with arbitrary text.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from research_dispatch.core import sanitize
from research_dispatch.publish import prbody
from tests.profiles import examples

reliability = pytest.mark.reliability
RENDERER = MarkdownIt("commonmark").enable("table")
# GitHub's mention pattern, widened: `(?:^|\W)@name` with Ruby's ASCII `\W`, without its lookaheads.
GITHUB_MENTION = re.compile(r"(?:^|[^A-Za-z0-9_])@[A-Za-z0-9]")
INERT = {"code", "pre", "a"}  # GitHub links no mention inside these
PIECES = ["@", "@@", "/@", "&#64;", "&#x40;", "&#X0040;", "&#0064;", "&commat;", "`", "``", "\\", "*", "_",
          "octocat", "acme/team", "a", "9", " ", "\n", "\r", "\t", ".", "-", "[", "](x)", "<b>", "</b>", "<code>",
          "é", "##[", "##[error]", "##[add-mask]", "::", "::error::", "#", ":", "]", "|", "> ", "    "]
TEXTS = st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=4)), max_size=30).map("".join)


class _TextNodes(HTMLParser):
    """The rendered text a mention filter reads: text nodes outside code, pre and links, entities decoded;
    and every tag the render opened (links, images, a math fence)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.open: list[str] = []
        self.nodes: list[str] = []
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag not in {"br", "hr", "img", "input"}:
            self.open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag in self.open:
            del self.open[len(self.open) - 1 - self.open[::-1].index(tag):]

    def handle_data(self, data: str) -> None:
        if not INERT & set(self.open):
            self.nodes.append(data)


def rendered(markdown: str) -> _TextNodes:
    parser = _TextNodes()
    parser.feed(RENDERER.render(markdown))
    parser.close()
    return parser


def mentions(markdown: str) -> list[str]:
    """Every mention GitHub would link in `markdown` (by the widened pattern)."""
    parser = rendered(markdown)
    return [m.group(0) for node in parser.nodes for m in GITHUB_MENTION.finditer(node)]


def commands(text: str) -> list[str]:
    """Every line of `text` the Actions runner would take for a workflow command."""
    return [line for line in re.split(r"\r\n|\r|\n", text) if "##[" in line or line.strip().startswith("::")]


BYPASSES = ["@@octocat", "&#64;octocat", "&#x40;octocat", "&commat;octocat", "/@octocat",
            "x @acme/team", "*a*@octocat", "\\@octocat", "<b>@octocat</b>"]


@pytest.mark.parametrize("text", BYPASSES)
def test_the_checker_sees_each_old_bypass_as_a_mention(text: str) -> None:
    """Not a vacuous check: the renderer and the pattern find the mention in each raw bypass."""
    assert mentions(text), text


def test_a_mention_inside_a_code_span_stays_inert_and_the_span_whole() -> None:
    """The old guard wrapped `@x` in backticks; inside a code span that closed the span and opened the
    mention (its output, checked here, pings). The neutraliser adds no backtick: one span, no mention."""
    assert mentions("`a `@octocat` b`")  # what the old guard made of "`a @octocat b`"
    out = sanitize.neutralise("`a @octocat b`")
    assert mentions(out) == [] and RENDERER.render(out).count("<code>") == 1


@reliability(area="hostile", case="a mention that bypassed the old guard, in a PR body or claim diff: {id}",
             expect="after `sanitize.neutralise` (and in `prbody.inline`/`block`), a CommonMark render read with "
                    "GitHub's mention pattern pings nobody; e-mail addresses stay as they are")
@pytest.mark.parametrize("text", BYPASSES, ids=[b.replace("\\", "backslash ") for b in BYPASSES])
def test_each_old_bypass_pings_nobody(text: str) -> None:
    assert mentions(sanitize.neutralise(text)) == []
    assert mentions(prbody.inline(text)) == [] and mentions(prbody.block(text)) == []
    assert sanitize.neutralise("mail a@b.org or git@host") == "mail a@b.org or git@host"


COMMANDS = {"##[error] mid-line": "boom ##[error]forged", "##[add-mask] mid-line": "x ##[add-mask]secret",
            ":: after spaces": "  ::error::x", ":: after an em space": "\u2003::warning::x",
            ":: after a carriage return": "a\r::add-mask::b", "###[ (three hashes)": "###[group]x"}


@reliability(area="hostile", case="a workflow command in text bound for the job log: {id}",
             expect="no line of `sanitize.neutralise`/`for_log` output is a command for the runner's v1 (`##[` at "
                    "any index) or v2 (`::` after trimming) parser")
@pytest.mark.parametrize("text", list(COMMANDS.values()), ids=list(COMMANDS))
def test_workflow_commands_anywhere_in_a_line_are_broken(text: str) -> None:
    assert commands(text)
    assert commands(sanitize.neutralise(text)) == []
    assert commands(sanitize.for_log(text)) == []


@pytest.mark.slow
@reliability(area="hostile", case="hypothesis: arbitrary text mixed with code spans, @@, /@, entities, "
                                   "backslashes, emphasis, raw HTML, `##[` and `::` pieces",
             expect="the neutralised text renders (CommonMark) with no mention GitHub would link and holds no line "
                    "the runner takes for a command; neutralising twice changes nothing; text without `@`, `&`, "
                    "`##[` or `::` is left exactly as it was")
@settings(max_examples=examples(400), deadline=None)
@given(TEXTS)
@example("`a @octocat b`")
@example("``x`` @@y &#64;z /@w")
def test_neutralised_text_pings_nobody_and_forges_no_command(text: str) -> None:
    out = sanitize.neutralise(text)
    assert mentions(out) == [], (text, out)
    assert commands(out) == [], (text, out)
    assert sanitize.neutralise(out) == out
    for rendered in (prbody.inline(text), prbody.block(text), sanitize.for_pr_body(text)):
        assert mentions(rendered) == [], (text, rendered)
    assert commands(sanitize.for_log(text)) == []
    if not any(mark in text for mark in ("@", "&", "##[", "::")):
        assert out == text


# -- what else GitHub acts on in a body: references, closing keywords, links, images, autolinks, math ----------
# GitHub's documented autolinked references ("Autolinked references and URLs"): `#26`, `GH-26`,
# `owner/repo#26` (its pattern needs the ASCII `#` and a digit), bare `http(s)://`/`ftp://` URLs and `www.`
# (GFM's extended autolinks), checked here as supersets on the rendered text nodes outside code, pre and links;
# a closing keyword acts only through such a reference. Links and images are what the renderer makes of
# `[t](u)`, `![a](u)`, `[t][r]` + `[r]: u` and `<u>`; math is any `$` left in a text node, or a `math` fence.
GITHUB_REFERENCE = re.compile(r"#[0-9]|(?i:\bgh-[0-9])")
GITHUB_AUTOLINK = re.compile(r"(?i)(?:https?|ftp)://|www\.")
ACTS = {"fixes #1": "fixes #1", "closes owner/repo#2": "closes owner/repo#2", "owner/repo#1234": "see owner/repo#1234",
        "GH-7": "resolves GH-7", "a bare www. autolink": "www.evil.example/x", "a bare URL": "see https://evil.example/x",
        "a link": "[click here](https://evil.example/x)", "a remote image": "![pixel](https://evil.example/p.png)",
        "a reference link and its definition": "[click][1]\n\n[1]: https://evil.example/x",
        "inline math": "$\\color{red}{\\text{approved}}$", "display math": "$$x$$", "a math fence": "```math\nx\n```",
        "an entity-spelled reference": "fixes &#35;1 and &#x23;2 and &num;3", "a split entity": "fixes &#3&#53;;1",
        "a backslash-escaped reference": "fixes \\#1 and GH\\-7", "an escaped URL": "https\\://evil.example",
        "a reference inside a code span": "`fixes #1`", "an autolink in angle brackets": "<https://evil.example>"}


def acts(markdown: str) -> list[str]:
    """Everything GitHub would act on in `markdown` once rendered: references, autolinks, links, images, math."""
    parser = rendered(markdown)
    found = [m.group(0) for node in parser.nodes for pattern in (GITHUB_REFERENCE, GITHUB_AUTOLINK)
             for m in pattern.finditer(node)]
    found += [f"<{tag}>" for tag, _ in parser.tags if tag in {"a", "img"}]
    found += ["math fence" for tag, attrs in parser.tags if "language-math" in (attrs.get("class") or "")]
    found += ["$" for node in parser.nodes if "$" in node]
    return found


@pytest.mark.parametrize("text", list(ACTS.values()), ids=list(ACTS))
def test_the_checker_sees_what_github_acts_on(text: str) -> None:
    """Not a vacuous check: each raw text renders to something GitHub acts on (a code span excepted)."""
    assert acts(text) or text.startswith("`"), text


@reliability(area="hostile", case="untrusted text in a PR body that GitHub would act on: {id}",
             expect="after `sanitize.inert_markdown` (and `for_pr_body`, `prbody.inline`/`block`) a CommonMark "
                    "render holds no issue reference (`#1`, `GH-7`, `owner/repo#2`: closing keywords act on none), "
                    "no link, image or autolink, no math; the text still reads as written, with look-alike "
                    "characters")
@pytest.mark.parametrize("text", list(ACTS.values()), ids=list(ACTS))
def test_untrusted_text_gives_github_nothing_to_act_on(text: str) -> None:
    for rendered in (sanitize.inert_markdown(text), sanitize.for_pr_body(text), prbody.block(text),
                     prbody.inline(text)):
        assert acts(rendered) == [], (text, rendered)
    assert sanitize.inert_markdown(sanitize.inert_markdown(text)) == sanitize.inert_markdown(text)


PR_PIECES = [*PIECES, "#", "#1", "42", "GH-", "gh", "-7", "owner/repo", "fixes ", "closes ", "https", "http", "ftp",
             "://", "/", "www", "www.", "$", "$$", "![", "](", "][", "]:", "(", ")", "&#35;", "&#x23;", "&num;",
             "&#36;", "&dollar;", "&#45;", "&#58;", "&#46;", "&#47;", "&#91;", "&#93;", "&#40;", "&amp;", "&#3", "5;",
             "```math\n", "<", ">", "\\#", "\\:", "\\.", "\\-"]
PR_TEXTS = st.lists(st.one_of(st.sampled_from(PR_PIECES), st.text(max_size=3)), max_size=30).map("".join)


@pytest.mark.slow
@reliability(area="hostile", case="hypothesis: arbitrary text mixed with issue references, closing keywords, "
                                   "URLs, `www.`, link and image syntax, `$`, entities, escapes and code spans",
             expect="`inert_markdown`, `for_pr_body`, `prbody.inline` and `prbody.block` output renders (CommonMark) "
                    "with no reference, autolink, link, image, math or mention GitHub would act on; "
                    "`inert_markdown` twice changes nothing")
@settings(max_examples=examples(400), deadline=None)
@given(PR_TEXTS)
@example("&#3&#53;;1 `#1` [a](b) www.x.org")
@example("&amp;#35;1")
@example(">```math\n")
def test_untrusted_markdown_is_inert_for_github(text: str) -> None:
    once = sanitize.inert_markdown(text)
    assert sanitize.inert_markdown(once) == once, (text, once)
    for rendered in (once, sanitize.for_pr_body(text), prbody.inline(text), prbody.block(text)):
        assert acts(rendered) == [], (text, rendered)
        assert mentions(rendered) == [], (text, rendered)
