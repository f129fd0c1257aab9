"""Model text as HTML: Markdown renders, nothing executable or fetching survives."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest

from common.markdown import markdown_render


def test_markdown_renders_what_an_answer_needs() -> None:
    html = markdown_render(
        "**postgres** is degraded:\n\n- `service:authentik` (depth 1)\n\n| a | b |\n|---|---|\n| 1 | 2 |"
    )
    assert "<strong>postgres</strong>" in html
    assert "<li><code>service:authentik</code> (depth 1)</li>" in html
    assert "<table>" in html and "<td>2</td>" in html


@pytest.mark.parametrize(
    "hostile",
    [
        "<script>alert(1)</script>",
        '<img src=x onerror="alert(1)">',
        '<a href="javascript:alert(1)">x</a>',
        "[x](javascript:alert(1))",
        "[x](JaVaScRiPt:alert(1))",
        '<button hx-get="/ui/x" hx-trigger="load">x</button>',
        '<div hx-swap-oob="innerHTML:#rail">x</div>',
        "<iframe src=//evil></iframe>",
        '<svg onload="alert(1)"></svg>',
    ],
)
def test_raw_html_and_dangerous_links_come_out_as_text(hostile: str) -> None:
    html = markdown_render(f"before {hostile} after")
    elements = _elements(html)
    assert {tag for tag, _ in elements} <= {"p", "a"}, elements
    for tag, attributes in elements:
        assert {name for name, _ in attributes} <= {"href", "rel"}, (tag, attributes)
        assert not any((value or "").lower().startswith("javascript") for _, value in attributes)


def _elements(html: str) -> list[tuple[str, list[tuple[str, str | None]]]]:
    found: list[tuple[str, list[tuple[str, str | None]]]] = []

    class Collector(HTMLParser):
        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            found.append((tag, attrs))

    Collector().feed(html)
    return found


def test_images_are_never_fetched() -> None:
    html = markdown_render("![status](https://tracker.example/pixel.png)")
    assert "<img" not in html
    assert 'href="https://tracker.example/pixel.png"' in html


def test_links_that_remain_do_not_leak_the_opener() -> None:
    html = markdown_render("[docs](https://oikos.example/runbooks)")
    assert 'href="https://oikos.example/runbooks"' in html
    assert 'rel="noopener noreferrer nofollow"' in html
