"""Model text as safe HTML: Markdown rendered with raw HTML disabled, then sanitised.

Two independent layers, so a gap in one does not open a hole: markdown-it-py never passes raw HTML
through (it escapes it), and nh3 keeps only the tags and attributes a chat answer needs. Images are
not rendered at all: an image in model output would make the browser fetch a URL the model chose.
"""

from __future__ import annotations

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


def markdown_render(text: str) -> str:
    """Sanitised HTML for a finished block of model text (callers mark it safe)."""
    html = _markdown.render(text)
    return nh3.clean(
        html,
        tags=_TAGS,
        attributes=_ATTRIBUTES,
        url_schemes=_URL_SCHEMES,
        link_rel="noopener noreferrer nofollow",
        strip_comments=True,
    )
