"""Template helpers of the control room: safe DOM ids, Markdown, JSON, usage and links."""

from __future__ import annotations

import datetime
import json
import uuid
from decimal import Decimal
from typing import Any
from urllib.parse import quote, urlencode

from django import template
from django.conf import settings
from django.urls import reverse
from django.utils import timezone
from django.utils.safestring import SafeString, mark_safe
from django.utils.timesince import timesince

from common import dom
from common.charts import chart_for_result
from common.dependency_graph import blast_graph as blast_graph_svg
from common.markdown import markdown_render
from oikos import change_view

register = template.Library()

# Class names for values that come from Oikos: only known values become classes.
_RISK_CLASSES = {"reversible_low": "low", "config_mutation": "medium", "destructive": "high"}
_STAGES = {"pending", "approved", "running", "completed", "failed", "denied", "proposed", "checking", "unconfirmed"}


@register.filter
def markdown(text: str) -> SafeString:
    """Rendered, sanitised Markdown of model text; its `[note N]` citations link to the notes."""
    return mark_safe(markdown_render(str(text), note_url=notes_url()))  # sanitised by nh3 in markdown_render


def notes_url() -> str:
    """The Notes page's path (`/ui/notes/`, under the site's prefix): a note is `notes_url() + "<id>/"`."""
    return reverse("controlroom:home") + "notes/"


@register.simple_tag
def note_url(note_id: Any) -> str:
    """The page of one note; "" for anything but a number."""
    text = str(note_id)
    return f"{notes_url()}{int(text)}/" if text.isdigit() else ""


@register.filter
def pretty_json(value: Any) -> str:
    """Arguments and results as indented JSON (escaped by the template like any text)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return value
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False, default=str)


@register.filter
def risk_class(value: str) -> str:
    return _RISK_CLASSES.get(str(value), "unknown")


@register.filter
def stage_class(value: str) -> str:
    return str(value) if str(value) in _STAGES else "unknown"


@register.filter
def speaker(actor: str) -> str:
    """Who asked a question, as the transcript names them: `operator:alice` → alice."""
    kind, _, name = str(actor).partition(":")
    if not name:
        return "You"
    return f"{name} (peer agent)" if kind == "peer" else name


@register.filter
def short_id(value: Any) -> str:
    return str(value).split("-")[0]


# DOM ids and classes come from `common.dom`, which the consumers also use to target their
# updates: registered as they are, a page and what is sent to it cannot disagree.
for _dom_function in (
    dom.turn_dom_id,
    dom.turn_body_dom_id,
    dom.turn_foot_dom_id,
    dom.block_dom_id,
    dom.thinking_dom_id,
    dom.thinking_text_dom_id,
    dom.chip_dom_id,
    dom.approval_dom_class,
    dom.change_dom_class,
    dom.decide_form_dom_id,
    dom.elicitation_dom_id,
    dom.proposal_dom_id,
):
    register.simple_tag(_dom_function)


@register.simple_tag
def oikos_ledger_url(correlation_id: str) -> str:
    """Oikos's ledger filtered to one turn, or "" when `OIKOS_LEDGER_URL` is not set."""
    base = (settings.OIKOS_LEDGER_URL or "").strip()
    if not base:
        return ""
    value = str(uuid.UUID(str(correlation_id)))
    if "{correlation_id}" in base:
        return base.replace("{correlation_id}", quote(value, safe=""))
    joiner = "&" if "?" in base else "?"
    return f"{base}{joiner}{urlencode({'correlation_id': value})}"


@register.filter
def usd(value: Any) -> str:
    """A cost in USD: 0.012345 → $0.0123 (under a dollar, four decimals), 12.5 → $12.50."""
    try:
        amount = Decimal(str(value))
    except ArithmeticError:
        return ""
    return f"${amount:,.4f}" if amount < 1 else f"${amount:,.2f}"


@register.filter
def tokens(value: Any) -> str:
    """1234567 → 1,234,567 (usage numbers)."""
    try:
        return f"{int(value):,}"
    except (TypeError, ValueError):
        return "0"


@register.filter
def eval_seconds(value: Any) -> str:
    """A latency in milliseconds as seconds: 12345 → 12.3 s."""
    try:
        return f"{int(value) / 1000:.1f} s"
    except (TypeError, ValueError):
        return "—"


@register.filter
def percent(value: Any) -> str:
    """A share as a whole percentage: 0.825 → 83%."""
    try:
        return f"{float(value):.0%}"
    except (TypeError, ValueError):
        return "—"


@register.filter
def approval_in(item: Any, approvals: dict[str, Any] | None) -> Any:
    """The state Oikos confirmed for an inline approval card, else what the transcript recorded
    (which is never decidable: see `ApprovalItem`)."""
    return (approvals or {}).get(item.approval_id, item)


@register.filter
def since(value: Any) -> str:
    """How long ago an ISO 8601 moment from Oikos was, in words ("4 minutes"); "" if unreadable.

    Computed when the card is drawn, so a redrawn card is right even though no clock ticks in it.
    """
    try:
        moment = datetime.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return ""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    seconds = (timezone.now() - moment).total_seconds()
    if seconds < 60:
        return "under a minute"
    return timesince(moment, timezone.now(), depth=1)


@register.filter
def tool_chart(item: Any) -> SafeString | None:
    """The picture of a finished tool call's result (a metric chart, a blast radius), or None."""
    if not getattr(item, "done", False) or getattr(item, "is_error", False) or getattr(item, "truncated", False):
        return None
    chart = chart_for_result(str(item.tool or item.name), item.result)
    return mark_safe(chart) if chart else None  # built by common.svg, which escapes every text


@register.filter
def blast_graph(entries: Any, target: str) -> SafeString | None:
    """An approval card's blast radius (`TargetFacts.blast_radius`) drawn as a tree under `target`."""
    graph = blast_graph_svg(target=str(target), entries=entries or [])
    return mark_safe(graph) if graph else None  # built by common.svg, which escapes every text


@register.filter
def chip_execution_id(item: Any) -> str:
    """The execution a `request_execution` chip started at once, without an approval card ("" for any other chip)."""
    return change_view.chip_execution_id(item)


@register.filter
def record_of(call: Any, records: dict[int, Any] | None) -> Any:
    """Hermes's record of the execution a ledger row started (`LedgerPage.records`), or None."""
    return (records or {}).get(int(getattr(call, "pk", 0) or 0))


@register.filter
def changes_of(session_id: Any, changes: dict[str, Any] | None) -> Any:
    """The executions a session asked for (`oikos.change_view.session_change_views`)."""
    return (changes or {}).get(str(session_id or ""), [])
