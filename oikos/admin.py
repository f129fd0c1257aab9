from __future__ import annotations

from django.contrib import admin

from agent.admin import ReadOnlyAdmin
from oikos.models import ApprovalDecision


@admin.register(ApprovalDecision)
class ApprovalDecisionAdmin(ReadOnlyAdmin):
    """Read-only: the decisions are an audit trail, never edited after the fact."""

    list_display = ("decided_at", "approval_id", "execution_id", "decision", "operator", "outcome", "detail")
    list_filter = ("decision", "outcome")
    search_fields = ("approval_id", "execution_id", "operator")
    date_hierarchy = "decided_at"
