"""Markdown pieces that no content can break: what the incident note (`export_markdown`) is built of.

Everything from outside Hermes — questions, answers, tool arguments and results, names, Oikos's
messages — is placed where it cannot change the note's structure:
- questions and answers are block quotes (every line prefixed), so a heading, a rule or an unclosed
  code fence in them ends with the quote; outside code blocks nothing can open HTML, a link or an
  image (`quoted`), so no raw HTML, `javascript:` link or remote image reaches a renderer that
  allows them;
- arguments and results are fenced code blocks whose fence is longer than any backtick run inside;
- short values (titles, names, ids) are inline text with Markdown punctuation backslash-escaped, or
  code spans delimited by more backticks than they contain;
- long results are folded (`folded`): `<details>` and `<summary>` are the note's only HTML, and the
  summary's text is HTML-escaped.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from urllib.parse import urlsplit

from markdown_it import MarkdownIt
from markdown_it.token import Token

_PUNCTUATION = re.compile(r"([\\`*_{}\[\]<>&!|#~])")
_BACKTICKS = re.compile(r"`+")


def inline(text: str) -> str:
    """`text` as literal inline Markdown on one line: punctuation escaped, newlines as spaces."""
    return _escaped(_PUNCTUATION, " ".join(str(text).split()))


def _escaped(pattern: re.Pattern[str], text: str) -> str:
    """`text` with what `pattern` matches backslash-escaped, but `<` as `&lt;`.

    cmark-gfm's autolink extension takes a backslash into the URL it links
    (`https://a.example\\<img ...>`), which leaves the `<` after it unescaped; an entity it keeps out.
    """
    return pattern.sub(_escape_one, text)


def _escape_one(match: re.Match[str]) -> str:
    return "&lt;" if match.group() == "<" else "\\" + match.group()


def code_span(text: str) -> str:
    """`text` as an inline code span, delimited by one more backtick than its longest run."""
    text = " ".join(str(text).split())
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=0)
    fence = "`" * (longest + 1)
    padded = f" {text} " if text.startswith("`") or text.endswith("`") or not text.strip() else text
    return f"{fence}{padded}{fence}"


def fenced(text: str, info: str = "") -> str:
    """A fenced code block holding `text` verbatim: its fence outruns any backtick run inside."""
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{text.rstrip()}\n{fence}"


def quoted(text: str) -> str:
    """Model or operator Markdown as a block quote that renders no HTML, no image and no odd link.

    Which lines are code blocks is decided by a CommonMark parser (markdown-it-py), not by
    patterns; they are kept verbatim (a renderer shows them as text). Every other line keeps its
    code spans, found as CommonMark finds them (a backslash escapes a backtick outside code, not
    inside), and has `\\`, the backtick, `[`, `]` and `&` backslash-escaped everywhere else, `<` as
    `&lt;`. So no link, image, autolink or HTML tag can begin outside code, whatever backslashes
    or fence-like lines the text holds; bare http(s) URLs still become links where the renderer links
    them. The result is parsed again, raw HTML allowed: should any HTML, image or link other than
    http(s) remain (a table cell splitting a code span, say), the text is fenced whole instead.
    """
    body = str(text).strip()
    code = _code_lines(body)
    lines = [line if number in code else _prose_line(line) for number, line in enumerate(body.split("\n"))]
    note = "\n".join(f"> {line}" if line.strip() else ">" for line in lines)
    return note if note_safe(note) else fenced(body, "text")


_PROSE = re.compile(r"([\\`\[\]<&])")
# What starts an autolink in cmark-gfm: a scheme's colon, `www.`, an email's `@`.
_AUTOLINK = re.compile(r"[:@]|www\.", re.IGNORECASE)
# Where cmark-gfm ends an autolink: ASCII white space only (not a no-break space).
_SPACE = re.compile(r"[ \t\r\n\f\v]")


def _prose_line(line: str) -> str:
    """`line` with its code spans as they are and everything around them escaped (`_PROSE`)."""
    out: list[str] = []
    start = at = 0
    while at < len(line):
        if line[at] == "\\":
            at += 2  # an escaped character: never opens a code span
            continue
        run = _BACKTICKS.match(line, at)
        if run is None:
            at += 1
            continue
        close = next((m for m in _BACKTICKS.finditer(line, run.end()) if len(m.group()) == len(run.group())), None)
        if close is None or _AUTOLINK.search(_SPACE.split(line[: run.start()])[-1]):
            # No closing run on the line, or a URL right before it that cmark-gfm's autolinks would
            # extend over the opening backticks (they end only at a space or `<`), leaving the span's
            # text to be read as Markdown: literal backticks, escaped with the prose.
            at = run.end()
            continue
        out += [_escaped(_PROSE, line[start:at]), line[at : close.end()]]
        start = at = close.end()
    out.append(_escaped(_PROSE, line[start:]))
    return "".join(out)


_CODE_BLOCKS = ("fence", "code_block")
# As permissive as a note's reader may be: raw HTML passed through, GitHub's tables and strikethrough.
_reader = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
_parser = MarkdownIt("commonmark", {"html": True})


def _code_lines(text: str) -> set[int]:
    lines: set[int] = set()
    for token in _parser.parse(text):
        if token.type in _CODE_BLOCKS and token.map:
            lines.update(range(*token.map))
    return lines


def note_safe(markdown: str) -> bool:
    """True when `markdown` parses to no raw HTML, no image and only http(s) links."""
    return all(_token_safe(token) for token in _tokens_nested(_reader.parse(markdown)))


def _tokens_nested(tokens: list[Token]) -> Iterator[Token]:
    for token in tokens:
        yield token
        if token.children:
            yield from _tokens_nested(token.children)


def _token_safe(token: Token) -> bool:
    if token.type in ("html_block", "html_inline", "image"):
        return False
    if token.type == "link_open":
        return urlsplit(str(token.attrGet("href") or "")).scheme.lower() in ("http", "https")
    return True


def folded(summary: str, body: str) -> str:
    """`body` (Markdown built by the note) behind a `<details>` whose `<summary>` is `summary` as text.

    The only HTML of the note's own: the summary is one line, HTML-escaped, so it can neither
    end the HTML block early nor open an element; the body sits between blank lines, so it is
    parsed as Markdown (a fenced block, say) where renderers fold it, and as itself where they
    show raw HTML as text.
    """
    line = html.escape(" ".join(str(summary).split()), quote=True)
    return f"<details>\n<summary>{line}</summary>\n\n{body.strip()}\n\n</details>"
