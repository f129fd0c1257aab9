"""Model text as safe HTML: Markdown rendered with raw HTML disabled, then sanitised.

Two independent layers, so a gap in one does not open a hole: markdown-it-py never passes raw HTML
through (it escapes it), and nh3 keeps only the tags and attributes a chat answer needs. Images are
not rendered at all: an image in model output would make the browser fetch a URL the model chose.
"""

from __future__ import annotations

import functools

import nh3
from markdown_it import MarkdownIt

_TAGS = {
    "p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "strong", "em", "del", "s", "code", "pre",
    "blockquote", "ul", "ol", "li", "a", "table", "thead", "tbody", "tr", "th", "td",
}  # fmt: skip
_ATTRIBUTES = {"a": {"href", "title"}, "ol": {"start"}}
_URL_SCHEMES = {"http", "https", "mailto"}

_markdown = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False}).enable(
    ["table", "strikethrough"]
)
_markdown.disable("image")


# Finished blocks never change and are drawn again and again (the page, then its socket's snapshot,
# the chat drawer on every other page), and markdown-it-py is most of a transcript's render time:
# the rendered HTML of blocks up to this size is kept, the most recently drawn first.
CACHED_BLOCK_CHARS = 8_192
CACHED_BLOCKS = 2_048


def markdown_render(text: str) -> str:
    """Sanitised HTML for a finished block of model text (callers mark it safe)."""
    if len(text) <= CACHED_BLOCK_CHARS:
        return _markdown_render_cached(text)
    return _markdown_render(text)


@functools.lru_cache(maxsize=CACHED_BLOCKS)
def _markdown_render_cached(text: str) -> str:
    return _markdown_render(text)


def _markdown_render(text: str) -> str:
    html = _markdown.render(text)
    return nh3.clean(
        html,
        tags=_TAGS,
        attributes=_ATTRIBUTES,
        url_schemes=_URL_SCHEMES,
        link_rel="noopener noreferrer nofollow",
        strip_comments=True,
    )
