"""The bridge's reads."""

from __future__ import annotations

from django.db.models import Count

from agent import presence
from agent.models import Instance
from matrix.models import MatrixApprovalCard, MatrixEvent, MatrixSync
from matrix.services import CARD_FINAL
from watch.models import Investigation


def card_by_event(*, event_id: str) -> MatrixApprovalCard | None:
    return MatrixApprovalCard.objects.select_related("thread").filter(event_id=event_id).first()


def card_pending_in_thread(*, room_id: str, root_event_id: str) -> MatrixApprovalCard | None:
    """The newest card of the thread still waiting for a decision (what a bare "approve" means)."""
    return (
        MatrixApprovalCard.objects.select_related("thread")
        .filter(thread__room_id=room_id, thread__root_event_id=root_event_id, status="pending")
        .order_by("-created_at", "-id")
        .first()
    )


def cards_open() -> list[MatrixApprovalCard]:
    """Cards whose execution may still move (refreshed from Oikos when the bridge reconnects)."""
    return list(MatrixApprovalCard.objects.select_related("thread").exclude(status__in=CARD_FINAL))


def matrix_counts() -> dict[tuple[str, str], int]:
    """Claimed Matrix events by (kind, outcome), for `/metrics`."""
    rows = MatrixEvent.objects.values("kind", "outcome").annotate(count=Count("id"))
    return {(row["kind"], row["outcome"]): row["count"] for row in rows}


def escalations_unposted(*, user_id: str) -> list[Investigation]:
    """Investigations with an escalation that no bridge has posted, opened since this bridge first ran."""
    first_start = MatrixSync.objects.filter(user_id=user_id).values_list("created_at", flat=True).first()
    if first_start is None:
        return []
    return list(
        Investigation.objects.filter(opened_at__gte=first_start, matrix_escalation__isnull=True)
        .exclude(escalation={})
        .order_by("opened_at", "id")
    )


def bridges_running() -> int:
    """`manage.py matrix_bridge` processes alive now (their presence rows, less those whose process is gone)."""
    running = set(Instance.objects.filter(role="matrix", stopped_at__isnull=True).values_list("id", flat=True))
    gone, _ = presence.owners_gone(running)
    return len(running - gone)
