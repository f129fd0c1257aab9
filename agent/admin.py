"""Read-only review of conversations and the tool-call ledger; operators' notes, editable.

The admin is for audit, not editing: history is what the model saw and the ledger is evidence, so
nothing here can add, change or delete those rows. Notes are the exception — operators write them —
and are checked here as everywhere else (`agent.memory.notes.note_draft_check`); the admin is also
the one place a note is deleted (with its confirmation page), since the Notes page only deactivates.
Content blocks render as readable text and tool calls, never as raw JSON dumps; all of it goes
through `format_html`, since model output and tool results are untrusted.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from asgiref.sync import async_to_sync
from django import forms
from django.contrib import admin
from django.db.models import OuterRef, QuerySet, Subquery
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from access.identity import operator_identity
from agent.llm import ModelConfig
from agent.memory.notes import NoteDraft, NoteInvalid, note_draft_check, notes_changed_publish
from agent.models import Activity, AgentSession, Message, Note, NoteProposal, Turn

PREVIEW_CHARS = 2000


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


def _clip(text: str, limit: int = PREVIEW_CHARS) -> str:
    return text if len(text) <= limit else text[:limit] + f"\n… ({len(text) - limit:,} more characters)"


def _result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if block.get("type") == "text":
                parts.append(block.get("text", ""))
            else:
                parts.append(f"[{block.get('type', 'block')}]")
        return "\n".join(parts)
    return _pretty(content)


def content_render(blocks: list[dict[str, Any]]) -> SafeString:
    """Anthropic content blocks as readable HTML: text, thinking, tool calls and tool results
    (never a thinking block's signature or redacted data: opaque, and of no use to a reader)."""
    rows = []
    for block in blocks if isinstance(blocks, list) else []:
        kind = block.get("type")
        if kind == "text":
            rows.append(format_html('<div class="hermes-text">{}</div>', block.get("text", "")))
        elif kind == "thinking":
            rows.append(
                format_html(
                    '<details class="hermes-thinking"><summary>thinking</summary>{}</details>',
                    block.get("thinking", ""),
                )
            )
        elif kind == "redacted_thinking":
            rows.append(format_html("<div><em>{}</em></div>", "[thinking redacted by the API's safety systems]"))
        elif kind == "tool_use":
            rows.append(
                format_html(
                    '<div class="hermes-tool"><strong>calls {}</strong> <small>({})</small><pre>{}</pre></div>',
                    block.get("name", ""),
                    block.get("id", ""),
                    _pretty(block.get("input", {})),
                )
            )
        elif kind == "tool_result":
            rows.append(
                format_html(
                    '<div class="hermes-result"><strong>{}</strong> <small>({})</small><pre>{}</pre></div>',
                    "error result" if block.get("is_error") else "result",
                    block.get("tool_use_id", ""),
                    _clip(_result_text(block.get("content", ""))),
                )
            )
        else:
            rows.append(format_html("<div>[{} block]</div>", kind or "unknown"))
    return format_html_join("", '<div class="hermes-block">{}</div>', ((row,) for row in rows))


class _NoWrites:
    """Refuses every add, change and delete: what the admin shows is a record, never edited after the fact."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class ReadOnlyAdmin(_NoWrites, admin.ModelAdmin):
    """A model's rows, to read."""

    class Media:
        # The classes the rendered transcripts use: the admin's CSP allows no style attributes.
        css = {"all": ["agent/admin.css"]}


class ReadOnlyInline(_NoWrites, admin.TabularInline):
    """Related rows under their parent, to read."""

    extra = 0
    can_delete = False
    show_change_link = False


class TurnInline(ReadOnlyInline):
    model = Turn
    fields = (
        "correlation",
        "status",
        "stop_reason",
        "model",
        "iterations",
        "tokens",
        "cost_usd",
        "started_at",
        "finished_at",
    )
    readonly_fields = fields

    @admin.display(description="correlation id")
    def correlation(self, turn: Turn) -> SafeString:
        url = reverse("admin:agent_activity_changelist") + f"?correlation_id={turn.pk}"
        return format_html('<a href="{}">{}</a>', url, turn.pk)

    @admin.display(description="tokens (in / out / cache read)")
    def tokens(self, turn: Turn) -> str:
        usage = turn.usage or {}
        return (
            f"{usage.get('input_tokens', 0)} / {usage.get('output_tokens', 0)} / "
            f"{usage.get('cache_read_input_tokens', 0)}"
        )


class MessageInline(ReadOnlyInline):
    model = Message
    # `kind` marks the summaries written for the model; every message stays listed.
    fields = ("created_at", "role", "kind", "rendered")
    readonly_fields = fields
    ordering = ["id"]

    @admin.display(description="content")
    def rendered(self, message: Message) -> SafeString:
        return content_render(message.content)


@admin.register(AgentSession)
class AgentSessionAdmin(ReadOnlyAdmin):
    list_display = ["title", "actor", "origin", "model_used", "created_at", "last_active_at"]
    list_filter = ["origin", "turns__status"]
    search_fields = ["title", "actor"]
    readonly_fields = [
        "id",
        "title",
        "actor",
        "origin",
        "model_used",
        "created_at",
        "last_active_at",
        "context_tokens",
        "context_window",
        "compactions",
        "compacted_at",
    ]
    inlines = [TurnInline, MessageInline]

    def get_queryset(self, request: HttpRequest) -> QuerySet[AgentSession]:
        # `AgentSession.model` is set only when the operator picked a model; the model that answered
        # is on each turn, so the list reads its latest turn's in the same query.
        latest = Turn.objects.filter(session=OuterRef("pk")).exclude(model="").order_by("-started_at")
        return super().get_queryset(request).annotate(latest_turn_model=Subquery(latest.values("model")[:1]))

    @admin.display(description="model", ordering="latest_turn_model")
    def model_used(self, session: AgentSession) -> str:
        """The model of the session's latest turn; before any turn, the one it will use."""
        answered: str | None = getattr(session, "latest_turn_model", None)
        if answered:
            return answered
        return session.model or f"{ModelConfig.from_settings().model} (default, no turn yet)"

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[AgentSession], search_term: str
    ) -> tuple[QuerySet[AgentSession], bool]:
        term = _uuid_or_none(search_term)
        if term is not None:
            by_id = queryset.filter(pk=term) | queryset.filter(turns__id=term)
            return by_id.distinct(), True
        return super().get_search_results(request, queryset, search_term)


@admin.register(Activity)
class ActivityAdmin(ReadOnlyAdmin):
    # `state` tells "outcome unknown" (cut off in flight, it may have run) from a plain error.
    list_display = ["started_at", "server", "tool", "state", "is_error", "duration_ms", "actor", "correlation_id"]
    list_filter = ["state", "is_error", "server", "tool", "actor"]
    search_fields = ["tool", "server", "actor"]
    date_hierarchy = "started_at"
    fields = (
        "correlation_id",
        "session_link",
        "actor",
        "server",
        "tool",
        "tool_use_id",
        "state",
        "is_error",
        "duration_ms",
        "started_at",
        "arguments_pretty",
        "result_pretty",
    )
    readonly_fields = fields

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Activity], search_term: str
    ) -> tuple[QuerySet[Activity], bool]:
        term = _uuid_or_none(search_term)
        if term is not None:
            return queryset.filter(correlation_id=term) | queryset.filter(session_id=term), False
        return super().get_search_results(request, queryset, search_term)

    def lookup_allowed(self, lookup: str, value: str, request: HttpRequest | None = None) -> bool:
        return lookup == "correlation_id" or super().lookup_allowed(lookup, value, request)

    @admin.display(description="session")
    def session_link(self, activity: Activity) -> SafeString | str:
        if not activity.session_id:
            return "—"
        url = reverse("admin:agent_agentsession_change", args=[activity.session_id])
        return format_html('<a href="{}">{}</a>', url, activity.session_id)

    @admin.display(description="arguments")
    def arguments_pretty(self, activity: Activity) -> SafeString:
        return format_html("<pre>{}</pre>", _pretty(activity.arguments))

    @admin.display(description="result (stored once, capped at HERMES_LEDGER_RESULT_MAX_CHARS)")
    def result_pretty(self, activity: Activity) -> SafeString:
        result = activity.result or {}
        text = _result_text(result.get("content")) if "content" in result else _pretty(result)
        return format_html('<pre class="hermes-wrap">{}</pre>', text)


class NoteAdminForm(forms.ModelForm):
    """A note as the admin edits it: scope as text ("service:sonarr, lxc:media-*"), checked like the
    Notes page and `POST /notes` check it, so the admin refuses what they refuse."""

    entities = forms.CharField(
        required=False, help_text="Slugs or globs, separated by commas: service:sonarr, lxc:media-*, or *."
    )
    tags = forms.CharField(
        required=False, help_text="Words or signal kinds, separated by commas: http_timeout, upgrade."
    )

    class Meta:
        model = Note
        fields = ["text", "entities", "tags", "runbook", "active"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            self.initial["entities"] = ", ".join(self.instance.entities)
            self.initial["tags"] = ", ".join(self.instance.tags)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        try:
            checked = note_draft_check(
                NoteDraft(
                    text=data.get("text") or "",
                    entities=data.get("entities") or [],  # scope_parse takes text too
                    tags=data.get("tags") or [],
                    runbook=bool(data.get("runbook")),
                    active=bool(data.get("active")),
                )
            )
        except NoteInvalid as invalid:
            raise forms.ValidationError(str(invalid)) from None
        data.update(text=checked.text, entities=checked.entities, tags=checked.tags)
        return data


@admin.register(Note)
class NoteAdmin(admin.ModelAdmin):
    form = NoteAdminForm
    list_display = ["id", "title", "runbook", "active", "author", "updated_by", "updated_at"]
    list_filter = ["runbook", "active"]
    search_fields = ["text", "author"]
    readonly_fields = ["author", "updated_by", "source_session", "source_turn", "created_at", "updated_at"]

    def save_model(self, request: HttpRequest, obj: Note, form: Any, change: bool) -> None:
        actor = _admin_actor(request)
        if change:
            obj.updated_by = actor
        else:
            obj.author = actor
        super().save_model(request, obj, form, change)
        async_to_sync(notes_changed_publish)()

    def delete_model(self, request: HttpRequest, obj: Note) -> None:
        super().delete_model(request, obj)
        async_to_sync(notes_changed_publish)()


@admin.register(NoteProposal)
class NoteProposalAdmin(ReadOnlyAdmin):
    list_display = ["id", "status", "proposed_by", "decided_by", "created_at", "decided_at"]
    list_filter = ["status"]
    fields = (
        "session",
        "turn_id",
        "tool_use_id",
        "proposed_by",
        "text",
        "entities",
        "tags",
        "runbook",
        "status",
        "decided_by",
        "decided_at",
        "note",
        "created_at",
    )
    readonly_fields = fields


def _admin_actor(request: HttpRequest) -> str:
    """Who wrote it, as the page and the API record it (`operator:<name>`): the admin's signed-in
    user, else the operator the access layer found."""
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated:
        return f"operator:{user.get_username()}"
    identity = operator_identity(request)
    return identity.actor if identity is not None else "operator:unknown"


def _uuid_or_none(raw: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(raw.strip())
    except (ValueError, AttributeError):
        return None
