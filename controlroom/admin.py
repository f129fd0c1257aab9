from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from controlroom.models import ApprovalDecision


@admin.register(ApprovalDecision)
class ApprovalDecisionAdmin(admin.ModelAdmin):
    """Read-only: the decisions are an audit trail, never edited after the fact."""

    list_display = ("decided_at", "approval_id", "execution_id", "decision", "operator", "outcome", "detail")
    list_filter = ("decision", "outcome")
    search_fields = ("approval_id", "execution_id", "operator")
    date_hierarchy = "decided_at"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False
