"""Read-only review of what the watchers claimed and the investigations they opened; the schedules.

Like the conversations and the ledger (agent/admin.py), these rows are a record: which event was
handled by which watcher and what it led to is the evidence behind "no event missed, none handled
twice", so nothing here can add, change or delete them. Event data and escalations come from Oikos
and the model: untrusted, rendered through `format_html` only.

Schedules are settings, not a record: they are edited here, checked by the same
`watch.schedules.spec_check` as the Schedules page and `manage.py schedule`. Their runs are a record.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from asgiref.sync import async_to_sync
from django import forms
from django.contrib import admin
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from access.identity import operator_identity
from agent.admin import ReadOnlyAdmin, ReadOnlyInline
from watch.models import Investigation, Schedule, ScheduleRun, WatchedEvent
from watch.schedules import ScheduleInvalid, ScheduleSpec, schedules_changed_publish, spec_check


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


class ScheduleForm(forms.ModelForm):
    class Meta:
        model = Schedule
        fields = ("name", "kind", "question", "cron", "timezone", "matrix_room", "model", "may_propose", "enabled")

    def clean(self) -> dict[str, Any]:
        """The checks every entry point shares: a bad cron expression is refused with the same words."""
        cleaned = super().clean() or {}
        if self.errors:
            return cleaned
        try:
            values: dict[str, Any] = {field.name: cleaned.get(field.name) for field in dataclasses.fields(ScheduleSpec)}
            checked = spec_check(ScheduleSpec(**values))
        except ScheduleInvalid as exc:
            raise forms.ValidationError(str(exc)) from None
        cleaned.update(checked.__dict__)
        return cleaned


@admin.register(Schedule)
class ScheduleAdmin(admin.ModelAdmin):
    form = ScheduleForm
    list_display = ("name", "kind", "cron", "timezone", "enabled", "matrix_room", "owner", "updated_at")
    list_filter = ("enabled", "kind")
    search_fields = ("name", "question", "owner")
    readonly_fields = ("owner", "created_at", "updated_at", "runs_link")

    @admin.display(description="runs")
    def runs_link(self, schedule: Schedule) -> SafeString | str:
        if schedule.pk is None:
            return "—"
        runs = reverse("admin:watch_schedulerun_changelist")
        return format_html('<a href="{}?schedule__id__exact={}">its runs</a>', runs, schedule.pk)

    def save_model(self, request: HttpRequest, obj: Schedule, form: Any, change: bool) -> None:
        if not obj.owner:
            # Whoever the access layer says is signed in (local operator, proxy, or Django login).
            identity = operator_identity(request)
            obj.owner = identity.actor if identity else f"operator:{request.user.get_username()}"
        super().save_model(request, obj, form, change)
        async_to_sync(schedules_changed_publish)(obj.pk)

    def delete_model(self, request: HttpRequest, obj: Schedule) -> None:
        schedule_id = obj.pk
        super().delete_model(request, obj)
        async_to_sync(schedules_changed_publish)(schedule_id)


@admin.register(ScheduleRun)
class ScheduleRunAdmin(ReadOnlyAdmin):
    list_display = ("slot", "schedule", "state", "skipped_reason", "verdict", "by", "finished_at")
    list_filter = ("state", "skipped_reason", "schedule")
    search_fields = ("verdict", "schedule__name")
    date_hierarchy = "slot"
    fields = (
        "schedule",
        "slot",
        "state",
        "skipped_reason",
        "verdict",
        "session_link",
        "turn_id",
        "by",
        "owner",
        "claimed_at",
        "finished_at",
    )
    readonly_fields = fields
    list_select_related = ("schedule",)

    @admin.display(description="session")
    def session_link(self, run: ScheduleRun) -> SafeString | str:
        if run.session_id is None:
            return "—"
        return format_html(
            '<a href="{}">in the control room</a> · <a href="{}">in the admin</a>',
            reverse("controlroom:session", args=[run.session_id]),
            reverse("admin:agent_agentsession_change", args=[run.session_id]),
        )
