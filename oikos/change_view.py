"""What a card shows of Hermes's record of an execution (`agent.models.Change`): its follow-up, the
verdict, and the way back.

Plain data read from the database in one place, so the approval cards (rail and inline), the tool
chips of executions that ran without an approval, the ledger and the export all say the same thing.
Templates draw it with `controlroom/partials/change_verdict.html`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.db.models import Count

from agent.models import Change
from agent.store.changes import FINISHED, undo_for
from common import dom

VERDICT_WORDS: dict[str, str] = {
    Change.Verdict.CLEARED: "cleared",
    Change.Verdict.NOT_CLEARED: "not cleared",
    Change.Verdict.FAILED: "failed",
}


@dataclass(frozen=True)
class ChangeView:
    execution_id: str
    session_id: str
    action: str
    target: str
    status: str
    # pending, claimed, done, skipped (`Change.FollowUp`)
    followup: str
    followup_note: str
    followup_turn_id: str
    verdict: str
    verdict_detail: str
    # From the end of the execution to the verdict; None when either is unknown.
    seconds_after: int | None
    # The rollback Oikos could make, not offered yet.
    undoable: bool
    undo_proposal_id: str
    # The execution that undid this one, and the one this one undoes.
    undone_by: str
    undoes: str

    @property
    def dom_class(self) -> str:
        return dom.change_dom_class(self.execution_id)

    @property
    def finished(self) -> bool:
        return self.status in FINISHED

    @property
    def verdict_words(self) -> str:
        return VERDICT_WORDS.get(self.verdict, self.verdict)

    @property
    def after(self) -> str:
        """ "40 s", "3 min", "2 h": how long after the execution ended the verdict came."""
        if self.seconds_after is None:
            return ""
        seconds = self.seconds_after
        if seconds < 120:
            return f"{seconds} s"
        if seconds < 2 * 3600:
            return f"{seconds // 60} min"
        return f"{seconds // 3600} h"

    @property
    def followup_url(self) -> str:
        """The follow-up turn in its session's page (the turn's anchor is `common.dom.turn_dom_id`)."""
        if not self.followup_turn_id or not self.session_id:
            return ""
        return f"/ui/s/{self.session_id}/#{dom.turn_dom_id(self.followup_turn_id)}"

    @property
    def undo_proposal_url(self) -> str:
        """The proposal of the undo on the approvals page, where an operator decides it."""
        if not self.undo_proposal_id:
            return ""
        return f"/ui/approvals/#{dom.proposal_dom_id(self.undo_proposal_id)}"

    def summary(self) -> str:
        """One line of words (the ledger, the export): "verified cleared 40 s after", "checking…",
        "not checked: …", with the undo offered or taken."""
        parts: list[str] = []
        if self.verdict:
            line = f"verified {self.verdict_words}"
            if self.after:
                line += f" {self.after} after"
            parts.append(line)
        elif self.followup == Change.FollowUp.CLAIMED:
            parts.append("checking…")
        elif self.followup == Change.FollowUp.SKIPPED:
            parts.append(f"not checked: {self.followup_note}" if self.followup_note else "not checked")
        if self.undone_by:
            parts.append(f"undone by {self.undone_by}")
        elif self.undo_proposal_id:
            parts.append("undo offered")
        if self.undoes:
            parts.append(f"undoes {self.undoes}")
        return " · ".join(parts)


def change_view(change: Change, *, undone_by: str = "") -> ChangeView:
    seconds_after = None
    if change.finished_at is not None and change.verdict_at is not None:
        seconds_after = max(int((change.verdict_at - change.finished_at).total_seconds()), 0)
    return ChangeView(
        execution_id=change.execution_id,
        session_id=str(change.session_id or ""),
        action=change.action,
        target=change.target,
        status=change.status,
        followup=change.followup,
        followup_note=change.followup_note,
        followup_turn_id=str(change.followup_turn_id or ""),
        verdict=change.verdict,
        verdict_detail=change.verdict_detail,
        seconds_after=seconds_after,
        undoable=change.undo_proposal_id is None and not undone_by and undo_for(change) is not None,
        undo_proposal_id=str(change.undo_proposal_id or ""),
        undone_by=undone_by,
        undoes=change.undo_of.execution_id if change.undo_of_id and change.undo_of else "",
    )


def change_views(execution_ids: Iterable[str]) -> dict[str, ChangeView]:
    """The records of these executions (those Hermes asked for), by execution id."""
    wanted = {execution_id for execution_id in execution_ids if execution_id}
    if not wanted:
        return {}
    return _views(Change.objects.filter(execution_id__in=wanted))


def change_views_of_calls(activity_ids: Iterable[int]) -> dict[int, ChangeView]:
    """The records of the executions these ledger rows (`request_execution` calls) started, by row id."""
    wanted = set(activity_ids)
    if not wanted:
        return {}
    rows = Change.objects.filter(activity_id__in=wanted)
    by_execution: dict[str, int] = {
        execution_id: activity_id
        for execution_id, activity_id in rows.values_list("execution_id", "activity_id")
        if activity_id is not None
    }
    return {
        by_execution[execution_id]: view for execution_id, view in _views(rows).items() if execution_id in by_execution
    }


def _views(query: Any) -> dict[str, ChangeView]:
    rows = list(query.select_related("undo_of"))
    undone = dict(
        Change.objects.filter(undo_of__in=[row.pk for row in rows])
        .order_by("requested_at")
        .values_list("undo_of_id", "execution_id")
    )
    return {row.execution_id: change_view(row, undone_by=undone.get(row.pk, "")) for row in rows}


def change_view_get(execution_id: str) -> ChangeView | None:
    return change_views([execution_id]).get(execution_id)


def chip_execution_id(item: Any) -> str:
    """The execution a finished `request_execution` tool call started without an approval card (it
    ran at once): "" for any other call, and for one parked for approval (its card shows the record)."""
    if getattr(item, "tool", "") != "request_execution" or not getattr(item, "done", False) or item.is_error:
        return ""
    try:
        result = json.loads(item.result)
    except (TypeError, ValueError):
        return ""
    if not isinstance(result, dict) or result.get("needs_approval") is True or result.get("status") == "proposed":
        return ""
    return str(result.get("execution_id") or "")


# The verdict label of an execution whose follow-up has not given one (`oikos.metrics`).
FOLLOWUP_VERDICTS = {
    Change.FollowUp.PENDING: "pending",
    Change.FollowUp.CLAIMED: "checking",
    Change.FollowUp.SKIPPED: "unchecked",
    Change.FollowUp.DONE: "unknown",
}


def change_counts() -> dict[tuple[str, str], int]:
    """How many executions Hermes asked for, by (verdict, Oikos's status): one grouped query."""
    counts: dict[tuple[str, str], int] = {}
    rows = Change.objects.order_by().values_list("verdict", "followup", "status").annotate(count=Count("id"))
    for verdict, followup, status, count in rows:
        key = (verdict or FOLLOWUP_VERDICTS.get(followup, followup), status or "unknown")
        counts[key] = counts.get(key, 0) + count
    return counts


def session_change_views(session_ids: Iterable[Any]) -> dict[str, list[ChangeView]]:
    """The executions each of these sessions asked for, oldest first, by session id (as text)."""
    wanted = {session_id for session_id in session_ids if session_id}
    if not wanted:
        return {}
    rows = Change.objects.filter(session_id__in=wanted).order_by("requested_at", "id")
    by_session: dict[str, list[ChangeView]] = {}
    for view in _views(rows).values():
        by_session.setdefault(view.session_id, []).append(view)
    return by_session


def undo_offered_as(proposal_id: Any) -> ChangeView | None:
    """The change whose undo this proposal offers (`agent.store.changes.undo_offered`), if any."""
    execution_id = Change.objects.filter(undo_proposal_id=proposal_id).values_list("execution_id", flat=True).first()
    return change_view_get(execution_id) if execution_id else None
