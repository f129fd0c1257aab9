"""Reviewing interop in the admin: pairing tokens (revocable), conversations with peers and their
exchanges (stoppable), and the A2A task store. Nothing else can be added or edited here: tokens are
issued with `manage.py a2a_pair`, conversations by the peers and the model.
"""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from agent.admin import ReadOnlyAdmin, ReadOnlyInline
from interop import services
from interop.models import A2ATask, PairingToken, PeerConversation, PeerExchange


@admin.register(PairingToken)
class PairingTokenAdmin(ReadOnlyAdmin):
    list_display = ["peer", "key_id", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["peer", ("revoked_at", admin.EmptyFieldListFilter)]
    search_fields = ["peer", "key_id"]
    readonly_fields = ["peer", "key_id", "created_at", "last_used_at", "revoked_at"]
    exclude = ["digest"]
    actions = ["revoke"]

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request: HttpRequest, queryset: QuerySet[PairingToken]) -> None:
        count = services.pairing_tokens_revoke(token_ids=queryset.values_list("pk", flat=True))
        self.message_user(request, f"Revoked {count} token(s); peers using them now get 401.", messages.SUCCESS)


class PeerExchangeInline(ReadOnlyInline):
    model = PeerExchange
    fields = ["started_at", "state", "message", "reply", "error", "duration_ms", "turn"]
    readonly_fields = ["started_at", "state", "message", "reply", "error", "duration_ms", "turn"]
    ordering = ["started_at", "id"]


@admin.register(PeerConversation)
class PeerConversationAdmin(ReadOnlyAdmin):
    list_display = ["peer", "direction", "dialect", "external_id", "status", "stop_reason", "turns", "updated_at"]
    list_filter = ["direction", "dialect", "status", "stop_reason", "peer"]
    search_fields = ["peer", "external_id"]
    readonly_fields = [
        "peer",
        "direction",
        "dialect",
        "external_id",
        "session_link",
        "status",
        "stop_reason",
        "turns",
        "remote_task_id",
        "remote_state",
        "started_at",
        "updated_at",
    ]
    exclude = ["session"]
    inlines = [PeerExchangeInline]
    actions = ["stop"]

    @admin.display(description="Hermes session")
    def session_link(self, conversation: PeerConversation) -> SafeString | str:
        if not conversation.session_id:
            return "—"
        url = reverse("admin:agent_agentsession_change", args=[conversation.session_id])
        return format_html('<a href="{}">{}</a>', url, conversation.session_id)

    @admin.action(description="Stop the selected conversations")
    def stop(self, request: HttpRequest, queryset: QuerySet[PeerConversation]) -> None:
        count = services.conversations_stop(conversation_ids=queryset.values_list("pk", flat=True), reason="operator")
        self.message_user(request, f"Stopped {count} conversation(s): no further message is sent or accepted.")


@admin.register(A2ATask)
class A2ATaskAdmin(ReadOnlyAdmin):
    list_display = ["id", "owner", "context_id", "state", "updated_at"]
    list_filter = ["state", "owner"]
    search_fields = ["id", "context_id"]
    readonly_fields = ["id", "owner", "context_id", "state", "data", "updated_at"]
