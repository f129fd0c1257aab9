"""Read-only review of what the watchers claimed and the investigations they opened.

Like the conversations and the ledger (agent/admin.py), these rows are a record: which event was
handled by which watcher and what it led to is the evidence behind "no event missed, none handled
twice", so nothing here can add, change or delete them. Event data and escalations come from Oikos
and the model: untrusted, rendered through `format_html` only.
"""

from __future__ import annotations

import json
from typing import Any

from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from agent.admin import ReadOnlyAdmin, ReadOnlyInline
from watch.models import Investigation, WatchedEvent


def _pretty(value: Any) -> SafeString:
    return format_html('<pre class="hermes-wrap">{}</pre>', json.dumps(value, indent=2, ensure_ascii=False))


class WatchedEventInline(ReadOnlyInline):
    model = WatchedEvent
    fields = ("event_id", "type", "at", "outcome", "claimed_at")
    readonly_fields = fields
    ordering = ("seq", "id")
    verbose_name_plural = "events counted on this investigation"


@admin.register(Investigation)
class InvestigationAdmin(ReadOnlyAdmin):
    list_display = ("opened_at", "title", "entity", "kind", "severity", "state", "skipped_reason", "fired_count")
    list_filter = ("state", "skipped_reason", "severity", "storm", "kind")
    search_fields = ("title", "entity", "kind", "first_event_id")
    date_hierarchy = "opened_at"
    fields = (
        "title",
        "session_link",
        "entity",
        "kind",
        "severity",
        "state",
        "skipped_reason",
        "storm",
        "fired_count",
        "first_event_id",
        "opened_at",
        "last_fired_at",
        "resolved_at",
        "escalation_pretty",
        "event_pretty",
        "storm_events_pretty",
    )
    readonly_fields = fields
    inlines = [WatchedEventInline]

    @admin.display(description="session")
    def session_link(self, investigation: Investigation) -> SafeString | str:
        if investigation.session_id is None:
            return "—"
        return format_html(
            '<a href="{}">in the control room</a> · <a href="{}">in the admin</a>',
            reverse("controlroom:session", args=[investigation.session_id]),
            reverse("admin:agent_agentsession_change", args=[investigation.session_id]),
        )

    @admin.display(description="escalation")
    def escalation_pretty(self, investigation: Investigation) -> SafeString:
        return _pretty(investigation.escalation)

    @admin.display(description="event")
    def event_pretty(self, investigation: Investigation) -> SafeString:
        return _pretty(investigation.event)

    @admin.display(description="storm events")
    def storm_events_pretty(self, investigation: Investigation) -> SafeString:
        return _pretty(investigation.storm_events)


@admin.register(WatchedEvent)
class WatchedEventAdmin(ReadOnlyAdmin):
    list_display = ("event_id", "epoch", "type", "at", "outcome", "investigation", "claimed_by", "claimed_at")
    list_filter = ("outcome", "type", "epoch")
    search_fields = ("event_id", "type")
    date_hierarchy = "claimed_at"
    fields = (
        "event_id",
        "epoch",
        "seq",
        "type",
        "at",
        "outcome",
        "investigation",
        "claimed_by",
        "claimed_at",
        "data_pretty",
    )
    readonly_fields = fields
    list_select_related = ("investigation",)

    @admin.display(description="data")
    def data_pretty(self, event: WatchedEvent) -> SafeString:
        return _pretty(event.data)
