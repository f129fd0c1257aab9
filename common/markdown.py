"""Model text as safe HTML: Markdown rendered with raw HTML disabled, then sanitised.

Two independent layers, so a gap in one does not open a hole: markdown-it-py never passes raw HTML
through (it escapes it), and nh3 keeps only the tags and attributes a chat answer needs. Images are
not rendered at all: an image in model output would make the browser fetch a URL the model chose.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import nh3
from markdown_it import MarkdownIt
from markdown_it.rules_core import StateCore
from markdown_it.token import Token

_TAGS = {
    "p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "strong", "em", "del", "s", "code", "pre",
    "blockquote", "ul", "ol", "li", "a", "table", "thead", "tbody", "tr", "th", "td",
}  # fmt: skip
_ATTRIBUTES = {"a": {"href", "title"}, "ol": {"start"}}
# The class of a `[note N]` link (`_note_links`), kept by nh3 on links only, with this value only.
_CLASSES = {"a": {"note-link"}}
_URL_SCHEMES = {"http", "https", "mailto"}

_markdown = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False}).enable(
    ["table", "strikethrough"]
)
_markdown.disable("image")

# A citation of an operator's note in model text (agent/memory/recall.py tells the model to cite
# `[note 12]`): only digits, so the link built from it is a fixed path plus a number.
_NOTE_CITATION = re.compile(r"\[note (\d{1,9})\]")


def _note_links(state: StateCore) -> None:
    """`[note N]` in plain text (not in code, not inside a link) becomes a link to the note's page,
    `env["note_url"]` + N + "/"; without a `note_url`, nothing changes."""
    base = state.env.get("note_url") if isinstance(state.env, dict) else None
    if not base:
        return
    for block in state.tokens:
        if block.type != "inline" or not block.children:
            continue
        children: list[Token] = []
        in_link = 0
        for token in block.children:
            in_link += 1 if token.type == "link_open" else -1 if token.type == "link_close" else 0
            if token.type != "text" or in_link or not _NOTE_CITATION.search(token.content):
                children.append(token)
                continue
            children.extend(_citations_split(token.content, base))
        block.children = children


def _citations_split(text: str, base: str) -> list[Token]:
    tokens: list[Token] = []
    last = 0
    for match in _NOTE_CITATION.finditer(text):
        if match.start() > last:
            tokens.append(_text_token(text[last : match.start()]))
        link = Token("link_open", "a", 1)
        link.attrs = {"href": f"{base}{int(match.group(1))}/", "class": "note-link"}
        tokens += [link, _text_token(match.group(0)), Token("link_close", "a", -1)]
        last = match.end()
    if last < len(text):
        tokens.append(_text_token(text[last:]))
    return tokens


def _text_token(content: str) -> Token:
    token = Token("text", "", 0)
    token.content = content
    return token


_markdown.core.ruler.after("inline", "note_links", _note_links)


# Finished blocks never change and are drawn again and again (the page, then its socket's snapshot,
# the chat drawer on every other page), and markdown-it-py is most of a transcript's render time:
# the rendered HTML of blocks up to this size is kept, the most recently drawn first.
CACHED_BLOCK_CHARS = 8_192
CACHED_BLOCKS = 2_048


def markdown_render(text: str, *, note_url: str = "") -> str:
    """Sanitised HTML for a finished block of model text (callers mark it safe); with `note_url`
    (the Notes page's path, e.g. `/ui/notes/`), each `[note N]` links to `note_url` + `N/`."""
    if len(text) <= CACHED_BLOCK_CHARS:
        return _markdown_render_cached(text, note_url)
    return _markdown_render(text, note_url)


@functools.lru_cache(maxsize=CACHED_BLOCKS)
def _markdown_render_cached(text: str, note_url: str) -> str:
    return _markdown_render(text, note_url)


def _markdown_render(text: str, note_url: str = "") -> str:
    env: dict[str, Any] = {"note_url": note_url}
    html = _markdown.render(text, env)
    return nh3.clean(
        html,
        tags=_TAGS,
        attributes=_ATTRIBUTES,
        allowed_classes=_CLASSES,
        url_schemes=_URL_SCHEMES,
        link_rel="noopener noreferrer nofollow",
        strip_comments=True,
    )
