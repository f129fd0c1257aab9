"""A few SVG elements built as escaped strings: the only way `common.charts` writes markup.

Every attribute value and every text node goes through `html.escape`, so text that came from a
tool result (a slug, a metric name, a unit) can never close a tag or open a new one.
"""

from __future__ import annotations

import math
from html import escape

SVG_NS = "http://www.w3.org/2000/svg"

Attribute = str | int | float


def number(value: float) -> str:
    """A coordinate: two decimals at most, no trailing zeros (short, and stable in tests)."""
    text = f"{value:.2f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def _attributes(attributes: dict[str, Attribute | None]) -> str:
    parts = []
    for name, value in attributes.items():
        if value is None:
            continue
        shown = number(value) if isinstance(value, float) else str(value)
        # Names are this module's own constants (with `_` for `-`); values are escaped, quotes too.
        parts.append(f' {name.rstrip("_").replace("_", "-")}="{escape(shown, quote=True)}"')
    return "".join(parts)


def element(tag: str, *children: str, **attributes: Attribute | None) -> str:
    """`<tag attrs>children</tag>`; children are already-built elements (see `text`)."""
    inner = "".join(children)
    if not inner:
        return f"<{tag}{_attributes(attributes)}/>"
    return f"<{tag}{_attributes(attributes)}>{inner}</{tag}>"


def text(value: object) -> str:
    """Text content, escaped."""
    return escape(str(value), quote=True)


def label(value: object, *, x: float, y: float, css: str, anchor: str = "start") -> str:
    return element("text", text(value), x=x, y=y, class_=css, text_anchor=anchor)


def document(*children: str, width: float, height: float, css: str, summary: str) -> str:
    """An accessible picture: `role="img"`, its summary as `aria-label` and `<title>`."""
    return element(
        "svg",
        element("title", text(summary)),
        *children,
        xmlns=SVG_NS,
        viewBox=f"0 0 {number(width)} {number(height)}",
        width=number(width),
        height=number(height),
        role="img",
        aria_label=summary,
        class_=css,
        font_family="system-ui, sans-serif",
        font_size=11,
    )


def finite(value: object) -> float | None:
    """A plotted number, or None for anything else (text, booleans, NaN, infinities)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number_value = float(value)
    return number_value if math.isfinite(number_value) else None
