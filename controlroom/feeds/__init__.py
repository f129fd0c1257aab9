"""The feeds of a control room socket: each keeps one optional part of a page current.

A socket (`controlroom.consumers`) holds the feeds its page asked for — the transcript of a
session, the rail, the session list, the approvals page's grid, the investigations list — and
routes each channel-layer message to the feed that answers it. What several feeds share lives
here: the socket's channel and Oikos relay (`Page`), and the decision forms the page shows
(`ApprovalForms`), one per approval however many cards of it are drawn.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field

from channels.db import database_sync_to_async

from controlroom import fragments
from oikos.approvals import approvals_confirmed
from oikos.change_view import ChangeView, change_view_get, change_views, chip_execution_id
from oikos.rail import ApprovalState
from oikos.relay import OikosRelay
from transcript.view import ApprovalItem, Change, ToolItem, TurnView

Send = Callable[[list[str]], Awaitable[None]]
Approval = ApprovalState | ApprovalItem


class ApprovalForms:
    """The decision forms in a page, and the approval cards its turns show (`inline`)."""

    def __init__(self) -> None:
        self.inline: dict[str, ApprovalItem] = {}
        self.shown: set[str] = set()

    def note(self, view: TurnView) -> None:
        for item in view.approvals():
            self.inline[item.approval_id] = item

    def replace(self, candidates: Iterable[Approval]) -> str:
        """Every form of the page drawn again: one per approval, however many cards of it the page shows."""
        shown = list({approval.approval_id: approval for approval in candidates}.values())
        self.shown = {approval.approval_id for approval in shown}
        return fragments.approval_forms_replace(shown)

    def inline_candidates(self, current: dict[str, ApprovalState], rail: Iterable[ApprovalState]) -> list[Approval]:
        """The decidable approvals of the turns' cards (as Oikos confirms them) and of the rail."""
        shown: dict[str, Approval] = {}
        for approval_id, item in self.inline.items():
            shown[approval_id] = current.get(approval_id, item)
        for approval in rail:
            shown[approval.approval_id] = approval
        return [approval for approval in shown.values() if approval.decidable]

    def new(self, current: Iterable[Approval], changes: list[Change]) -> str:
        """Decision forms for pending approvals this page shows for the first time."""
        candidates: dict[str, Approval] = {}
        for change in changes:
            if isinstance(change.item, ApprovalItem):
                candidates[change.item.approval_id] = change.item
        for approval in current:
            candidates[approval.approval_id] = approval
        new = [a for a in candidates.values() if a.decidable and a.approval_id not in self.shown]
        if not new:
            return ""
        self.shown.update(a.approval_id for a in new)
        return fragments.approval_forms_append(new)


@dataclass
class Page:
    """What the feeds of one socket share."""

    channel_name: str
    relay: OikosRelay
    send: Send
    forms: ApprovalForms = field(default_factory=ApprovalForms)

    async def approvals_current(self, items: Iterable[ApprovalItem]) -> dict[str, ApprovalState]:
        """What Oikos says of these cards now (the relay's state, else its REST API), with Hermes's
        record of each execution that finished."""
        items = list(items)
        current = await approvals_confirmed(items, relay=self.relay)
        await self.records_load([*items, *current.values()])
        return current

    async def records_load(self, approvals: Iterable[Approval]) -> None:
        """Hermes's record of the finished executions of these cards, on the cards (`oikos.change_view`)."""
        finished = [a for a in approvals if a.execution_id and a.stage in ("completed", "failed")]
        if not finished:
            return
        records = await database_sync_to_async(change_views)(a.execution_id for a in finished)
        for approval in finished:
            approval.record = records.get(approval.execution_id, approval.record)

    async def chips_load(self, views: Iterable[TurnView]) -> None:
        """Hermes's record on the chips of executions that ran without approval (the transcript has
        htmx disabled: a chip cannot fetch it itself)."""
        chips = [
            (item, execution_id)
            for view in views
            for item in view.items
            if isinstance(item, ToolItem) and (execution_id := chip_execution_id(item))
        ]
        if not chips:
            return
        records = await database_sync_to_async(change_views)(execution_id for _, execution_id in chips)
        for item, execution_id in chips:
            item.record = records.get(execution_id, item.record)

    async def record_changed(self, execution_id: str) -> ChangeView | None:
        """Hermes's record of an execution changed: read again, kept on the cards of it this process
        holds (so a card redrawn later shows it), and returned for a swap of every drawing of it."""
        record = await database_sync_to_async(change_view_get)(execution_id)
        if record is None:
            return None
        holders: list[Approval] = [*self.relay.state.approvals.values(), *self.forms.inline.values()]
        for approval in holders:
            if approval.execution_id == execution_id:
                approval.record = record
        return record
