"""The blast radius of an entity drawn as a small dependency tree (SVG), health colour per node.

Data in, SVG string out: no Django, no I/O. The entries are Oikos's blast radius
(`oikos_sim/graph.py`: `{slug, depth, via, type, health}`, nearest first), where `via` spells the
chain back to the target (`service:grafana depends_on service:authentik depends_on service:postgres`),
so each dependant hangs under the entity it depends on.

Drawn as an indented tree (target on top, one row per dependant, indented by depth) rather than in
columns by depth: the rail is narrow, and a tree keeps the labels at full size there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from common import svg

# Beyond this many dependants the graph ends with "+N more" (the card's list names them all).
NODES_SHOWN = 12
HEALTH_STATES = ("healthy", "degraded", "down", "unknown")
# Colours that read on dark and light backgrounds alike; the control room's stylesheet overrides
# them with its own variables, a Markdown viewer of an export keeps these.
HEALTH_FILL = {"healthy": "#3fb950", "degraded": "#d29922", "down": "#f85149", "unknown": "#8b949e"}
LABEL_CHARACTERS = 34

ROW = 20
INDENT = 18
LEFT = 10
DOT = 5
CHARACTER_WIDTH = 6.6


@dataclass
class _Node:
    slug: str
    health: str
    depth: int
    children: list[_Node] = field(default_factory=list)


def health_of(value: object) -> str:
    state = str(value or "unknown").lower()
    return state if state in HEALTH_STATES else "unknown"


def blast_graph(*, target: str, entries: Sequence[Any], shown: int = NODES_SHOWN) -> str | None:
    """The target and what depends on it, or None when there is nothing to draw."""
    nodes = _nodes(entries)
    if not isinstance(target, str) or not target or not nodes:
        return None
    root = _tree(target, nodes)
    rows = list(_preorder(root))[: shown + 1]
    hidden = len(nodes) - (len(rows) - 1)
    # The rows, "+N more" when some are left out, and the legend's line.
    height = (len(rows) + (1 if hidden else 0) + 1) * ROW + 4
    width = max(
        240.0,
        max(LEFT + row.depth * INDENT + 2 * DOT + 8 + len(_short(row.slug)) * CHARACTER_WIDTH for row in rows) + 10,
    )
    parts = [_edges(rows), *(_row(row, index) for index, row in enumerate(rows))]
    if hidden:
        parts.append(svg.label(f"+{hidden} more", x=LEFT + INDENT, y=len(rows) * ROW + 14, css="graph-more"))
    parts.append(_legend(nodes, y=height - 6))
    return svg.document(*parts, width=width, height=height, css="hermes-graph", summary=_summary(target, nodes))


def _nodes(entries: Sequence[Any]) -> list[tuple[_Node, str]]:
    """Readable entries as nodes with the slug they hang under; anything else is left out."""
    if not isinstance(entries, Sequence) or isinstance(entries, str):
        return []
    found = []
    for entry in entries:
        if not isinstance(entry, Mapping) or not isinstance(entry.get("slug"), str) or not entry["slug"]:
            continue
        depth = entry.get("depth")
        depth = depth if isinstance(depth, int) and not isinstance(depth, bool) and depth > 0 else 1
        via = entry.get("via")
        # `<slug> <relation> <parent> …`: the third word is what it depends on.
        words = via.split() if isinstance(via, str) else []
        parent = words[2] if len(words) > 2 else ""
        found.append((_Node(slug=entry["slug"], health=health_of(entry.get("health")), depth=depth), parent))
    return found


def _tree(target: str, nodes: list[tuple[_Node, str]]) -> _Node:
    root = _Node(slug=target, health="target", depth=0)
    by_slug = {target: root}
    for node, _ in nodes:
        by_slug.setdefault(node.slug, node)
    for node, parent in nodes:
        holder = by_slug.get(parent)
        # A chain that does not lead back (or loops) hangs under the target at its reported depth.
        if holder is None or holder is node or holder.depth >= node.depth:
            holder = root
        holder.children.append(node)
    _relevel(root, 0)
    return root


def _relevel(node: _Node, depth: int) -> None:
    node.depth = depth
    for child in node.children:
        _relevel(child, depth + 1)


def _preorder(node: _Node) -> list[_Node]:
    rows = [node]
    for child in node.children:
        rows.extend(_preorder(child))
    return rows


def _short(slug: str) -> str:
    return slug if len(slug) <= LABEL_CHARACTERS else slug[: LABEL_CHARACTERS - 1] + "…"


def _centre(row: _Node, index: int) -> tuple[float, float]:
    return LEFT + row.depth * INDENT + DOT, index * ROW + ROW / 2 + 2


def _edges(rows: list[_Node]) -> str:
    """Elbow lines from each node down and across to its children."""
    index_of = {id(row): index for index, row in enumerate(rows)}
    paths = []
    for index, row in enumerate(rows):
        x, y = _centre(row, index)
        for child in row.children:
            if id(child) not in index_of:
                continue
            child_x, child_y = _centre(child, index_of[id(child)])
            paths.append(
                f"M{svg.number(x)} {svg.number(y + DOT)}V{svg.number(child_y)}H{svg.number(child_x - DOT - 1)}"
            )
    if not paths:
        return ""
    return svg.element(
        "path", d=" ".join(paths), class_="graph-edge", fill="none", stroke="currentColor", stroke_opacity="0.45"
    )


def _row(row: _Node, index: int) -> str:
    x, y = _centre(row, index)
    is_target = row.health == "target"
    if is_target:
        dot = svg.element(
            "circle", cx=x, cy=y, r=DOT, class_="graph-target", fill="none", stroke="currentColor", stroke_width=2
        )
    else:
        dot = svg.element(
            "circle",
            svg.element("title", svg.text(row.health)),
            cx=x,
            cy=y,
            r=DOT,
            class_=f"graph-node health-{row.health}",
            fill=HEALTH_FILL[row.health],
        )
    name = svg.element(
        "text",
        # A shortened label keeps the whole slug as its tooltip.
        svg.element("title", svg.text(row.slug)) if _short(row.slug) != row.slug else "",
        svg.text(_short(row.slug)),
        x=x + DOT + 6,
        y=y + 4,
        class_="graph-label graph-label-target" if is_target else "graph-label",
        fill="currentColor",
        font_weight="600" if is_target else None,
    )
    return svg.element("g", dot, name, class_="graph-row")


def _legend(nodes: list[tuple[_Node, str]], *, y: float) -> str:
    present = [state for state in HEALTH_STATES if any(node.health == state for node, _ in nodes)]
    parts = []
    x = float(LEFT)
    for state in present:
        parts.append(svg.element("circle", cx=x + 4, cy=y - 4, r=4, class_=f"health-{state}", fill=HEALTH_FILL[state]))
        parts.append(svg.label(state, x=x + 11, y=y, css="graph-legend-label"))
        x += 11 + len(state) * CHARACTER_WIDTH + 12
    return svg.element("g", *parts, class_="graph-legend", fill="currentColor")


def _summary(target: str, nodes: list[tuple[_Node, str]]) -> str:
    direct = sum(1 for node, _ in nodes if node.depth == 1)
    unwell = [state for state in ("down", "degraded") if any(node.health == state for node, _ in nodes)]
    counts = ", ".join(f"{sum(1 for node, _ in nodes if node.health == state)} {state}" for state in unwell)
    noun = "dependant" if len(nodes) == 1 else "dependants"
    summary = f"Blast radius of {target}: {len(nodes)} {noun} ({direct} direct)"
    return f"{summary}, {counts}" if counts else summary
