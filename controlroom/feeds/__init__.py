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

from controlroom import fragments
from oikos.approvals import approvals_confirmed
from oikos.rail import ApprovalState
from oikos.relay import OikosRelay
from transcript.view import ApprovalItem, Change, TurnView

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
        """What Oikos says of these cards now (the relay's state, else its REST API)."""
        return await approvals_confirmed(items, relay=self.relay)
