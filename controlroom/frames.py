"""Every message the control room's websocket sends fits under the server's message limit.

Daphne's websocket layer (autobahn) refuses to send a message larger than its
`--websocket-max-message-size` (1 MiB by default, which `docker/start.sh` keeps):
the send raises, the consumer dies, the page's socket drops and reconnects, and the same too-large
snapshot kills it again. Text from outside (a server's question, a tool's result,
an Oikos approval) decides how large a fragment is, so the size cannot be left to chance.

So the consumer hands its out-of-band swaps to `frames_pack` as separate parts, never pre-joined:
parts are packed in order into as few messages as fit; the transcript and the rail's questions are
built as a replace followed by appends (`controlroom.fragments`), so a long page arrives in
several messages; a part too large alone is replaced by a short note in the same element (same
tag, id, classes and swap), which says so, rather than sent and lost with the connection.
"""

from __future__ import annotations

from collections.abc import Iterable
from html.parser import HTMLParser

from django.template.loader import render_to_string
from django.utils.html import format_html, format_html_join

# Daphne's default `--websocket-max-message-size`, in bytes of the UTF-8 payload.
FRAME_LIMIT_BYTES = 1024 * 1024

# The attributes a note keeps from the element it stands for: where it goes and what it is.
KEPT_ATTRIBUTES = ("id", "class", "hx-swap-oob", "data-status")


def frames_pack(parts: Iterable[str], *, limit: int = FRAME_LIMIT_BYTES) -> list[str]:
    """The messages to send for `parts`, in order, each at most `limit` bytes of UTF-8."""
    frames: list[str] = []
    current: list[str] = []
    size = 0
    for part in parts:
        if not part:
            continue
        length = _size(part)
        if length > limit:
            part = part_too_large(part, length)
            length = _size(part)
        if current and size + length > limit:
            frames.append("".join(current))
            current, size = [], 0
        current.append(part)
        size += length
    if current:
        frames.append("".join(current))
    return frames


def frame_fits(text: str, *, limit: int = FRAME_LIMIT_BYTES) -> bool:
    return _size(text) <= limit


def part_too_large(part: str, length: int) -> str:
    """A short note in place of `part`: its first element's tag and placement, with nothing of its content."""
    opening = _first_tag(part)
    note = render_to_string("controlroom/partials/too_large.html", {"size": length})
    if opening is None:
        return note
    tag, attributes = opening
    kept = format_html_join("", ' {}="{}"', ((name, value) for name, value in attributes if name in KEPT_ATTRIBUTES))
    return format_html("<{}{}>{}</{}>", tag, kept, note, tag)


def _size(text: str) -> int:
    return len(text.encode("utf-8", errors="surrogatepass"))


class _FirstTag(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: tuple[str, list[tuple[str, str]]] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self.found is None:
            self.found = (tag, [(name, value or "") for name, value in attrs])


def _first_tag(part: str) -> tuple[str, list[tuple[str, str]]] | None:
    # The parts are our own templates' output: the first element opens within the first lines.
    parser = _FirstTag()
    parser.feed(part[:4096])
    return parser.found
