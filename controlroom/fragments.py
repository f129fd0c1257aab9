"""The HTML the control room's websocket sends: out-of-band swaps for htmx 2's `ws` extension.

Every message is a run of top-level elements, each carrying `hx-swap-oob` with a target built
from our own UUIDs or from hashed keys (see `common.dom`), never from untrusted text. Content
comes from the templates, which escape everything except Markdown that `markdown_render` has
already sanitised.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.template.loader import render_to_string
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

from common import dom
from controlroom.frames import frame_fits
from controlroom.selectors import DigestCard, EscalationCard
from oikos.change_view import ChangeView
from oikos.rail import ApprovalState, RailState
from transcript.view import ApprovalItem, Change, Item, TextItem, ThinkingItem, TurnView

Approvals = dict[str, ApprovalState]


def _render(template: str, context: dict[str, Any]) -> SafeString:
    # Templates escape what they interpolate; the result is HTML we built.
    return mark_safe(render_to_string(f"controlroom/partials/{template}", context))


def item_html(view: TurnView, item: Item, approvals: Approvals, *, oob: str = "") -> SafeString:
    return _render("item.html", {"turn": view, "item": item, "approvals": approvals, "oob": oob})


def turn_html(view: TurnView, approvals: Approvals, *, oob: str = "") -> SafeString:
    return _render("turn.html", {"turn": view, "approvals": approvals, "oob": oob})


def transcript_replace(views: list[TurnView], approvals: Approvals) -> str:
    inner = _render("transcript.html", {"turns": views, "approvals": approvals})
    return format_html('<div hx-swap-oob="innerHTML:#transcript">{}</div>', inner)


def transcript_parts(views: list[TurnView], approvals: Approvals) -> list[str]:
    """The transcript replaced whole, or — when that would not fit one websocket message — emptied and
    then filled one turn at a time, so each turn travels (or is left out, saying so) on its own."""
    whole = transcript_replace(views, approvals)
    if frame_fits(whole) or not views:
        return [whole]
    return [transcript_replace([], approvals)] + [
        turn_append(view, approvals, first=index == 0) for index, view in enumerate(views)
    ]


def turn_append(view: TurnView, approvals: Approvals, *, first: bool = False) -> str:
    """A turn added at the end; the first one also clears the empty-transcript greeting."""
    html: str = format_html('<div hx-swap-oob="beforeend:#transcript">{}</div>', turn_html(view, approvals))
    if first:
        html += '<div hx-swap-oob="delete:#transcript-empty"></div>'
    return html


def turn_replace(view: TurnView, approvals: Approvals) -> str:
    # The article's own id is the target: outerHTML keeps it in its place in the transcript.
    return turn_html(view, approvals, oob="true")


def turn_changes(view: TurnView, changes: list[Change], approvals: Approvals) -> str:
    """The swaps that show `changes` of one turn."""
    return "".join(turn_changes_parts(view, changes, approvals))


def turn_changes_parts(view: TurnView, changes: list[Change], approvals: Approvals) -> list[str]:
    """The swaps that show `changes` of one turn, one part per change (see `controlroom.frames`)."""
    body = dom.turn_body_dom_id(view.turn_id)
    parts: list[str] = []
    for change in changes:
        item = change.item
        if change.kind == "item_new" and item is not None:
            parts.append(
                format_html('<div hx-swap-oob="beforeend:#{}">{}</div>', body, item_html(view, item, approvals))
            )
        elif change.kind == "text_append" and isinstance(item, TextItem):
            target = dom.block_dom_id(view.turn_id, item.block)
            parts.append(format_html('<span hx-swap-oob="beforeend:#{}">{}</span>', target, change.chunk))
        elif change.kind == "text_append" and isinstance(item, ThinkingItem):
            target = dom.thinking_text_dom_id(view.turn_id, item.block)
            parts.append(format_html('<span hx-swap-oob="beforeend:#{}">{}</span>', target, change.chunk))
        elif change.kind == "item_update" and item is not None:
            parts.append(item_html(view, item, approvals, oob="true"))
        elif change.kind == "finished":
            # Redrawn whole: its status, usage and every block in final form.
            return [turn_replace(view, approvals)]
    return parts


def turn_controls(running: TurnView | None) -> str:
    inner = _render("turn_controls.html", {"running": running})
    return format_html('<div hx-swap-oob="innerHTML:#turn-controls">{}</div>', inner)


def rail_parts(state: RailState) -> list[str]:
    """The rail replaced whole or, when too large for one message, its approval cards one at a time."""
    approvals = state.approvals_shown()
    whole = _rail_replace(state, approvals)
    if frame_fits(whole) or not approvals:
        return [whole]
    cards = [_render("approval_card.html", {"approval": a, "oob": "", "notice": ""}) for a in approvals]
    return [_rail_replace(state, [], approvals_follow=True)] + [
        format_html('<div hx-swap-oob="beforeend:#rail-approval-list">{}</div>', card) for card in cards
    ]


def _rail_replace(state: RailState, approvals: list[ApprovalState], *, approvals_follow: bool = False) -> str:
    inner = _render("rail.html", {"rail": state, "approvals": approvals, "approvals_follow": approvals_follow})
    return format_html('<div hx-swap-oob="innerHTML:#rail">{}</div>', inner)


def approval_cards_replace(approvals: Iterable[ApprovalState | ApprovalItem], *, notice: str = "") -> str:
    """Every card of each approval on the page (inline and in the rail) shows its new state."""
    return "".join(
        _render(
            "approval_card.html",
            {
                "approval": approval,
                "notice": notice,
                "oob": "outerHTML:." + dom.approval_dom_class(approval.approval_id),
            },
        )
        for approval in approvals
    )


def change_record(record: ChangeView, *, oob: bool = False) -> SafeString:
    """Hermes's record of one execution; `oob` redraws every drawing of it in the page (cards, chips).

    The redraw goes through the page's `#change-updates` (base.html), where controlroom.js puts it
    in place of each drawing of the record there is — none, when the record changed before its card
    reached the page (the card carries the record when drawn): an out-of-band swap aimed at the
    drawings themselves would be an error for a page that has none yet.
    """
    drawn = _render("change_verdict.html", {"record": record})
    if not oob:
        return drawn
    return format_html(
        '<div hx-swap-oob="beforeend:#change-updates"><template data-replaces=".{}">{}</template></div>',
        record.dom_class,
        drawn,
    )


def session_list_refresh(*, current: str) -> str:
    """An element that, once swapped in, makes the page fetch its session list again, with the
    search the operator typed (the server does not know it)."""
    return _render("session_refresh.html", {"current_session": current, "oob": True})


def approval_grid_replace(approvals: list[ApprovalState], problem: str) -> str:
    """The approvals page's cards, all of them, as Oikos lists them now."""
    return _render("approval_grid.html", {"oikos_approvals": approvals, "oikos_problem": problem, "oob": True})


def approval_forms_replace(approvals: Iterable[ApprovalState | ApprovalItem]) -> str:
    inner = _render("approval_forms.html", {"approvals": list(approvals)})
    return format_html('<div hx-swap-oob="innerHTML:#approval-forms">{}</div>', inner)


def approval_forms_append(approvals: Iterable[ApprovalState | ApprovalItem]) -> str:
    inner = _render("approval_forms.html", {"approvals": list(approvals)})
    return format_html('<div hx-swap-oob="beforeend:#approval-forms">{}</div>', inner)


def investigation_announce(news: dict[str, Any]) -> str:
    """A notice on top of the page: "Hermes opened an investigation: <title>", linking to it."""
    inner = _render("investigation_notice.html", {"news": news})
    return format_html('<div hx-swap-oob="afterbegin:#notices">{}</div>', inner)


def investigation_list_refresh() -> str:
    """An element that, once swapped in, makes the investigations page fetch its list again, with
    the filters and page it shows (the server does not know them)."""
    return _render("investigation_refresh.html", {})


def change_list_refresh() -> str:
    """An element that, once swapped in, makes the Changes page fetch its list again with the
    filters it shows."""
    return _render("change_refresh.html", {})


def note_list_refresh() -> str:
    """An element that, once swapped in, makes the Notes page fetch its list again with the
    filters it shows."""
    return _render("note_refresh.html", {})


def escalation_replace(card: EscalationCard) -> str:
    return _render("escalation_card.html", {"escalation": card, "oob": True})


def proposals_replace(pending: list[Any]) -> str:
    """The rail's proposals waiting for an operator (`agent.proposals.ProposalCard`)."""
    inner = _render("proposals.html", {"proposals": pending})
    return format_html('<div hx-swap-oob="innerHTML:#proposals">{}</div>', inner)


def proposal_card(card: Any, *, notice: str = "") -> str:
    """One proposal's card, redrawn after a decision."""
    return _render("proposal_card.html", {"proposal": card, "notice": notice, "oob": ""})


def note_proposals_replace(shown: list[Any]) -> str:
    """The rail's note proposals (`agent.memory.cards.NoteProposalCard`): pending, then just decided."""
    inner = _render("note_proposals.html", {"note_proposals": shown})
    return format_html('<div hx-swap-oob="innerHTML:#note-proposals">{}</div>', inner)


def note_proposal_cards_replace(card: Any, *, notice: str = "") -> str:
    """Every drawing of one note proposal in the page (the rail's, the chat's) shows its new state.

    Only sent to the page that clicked one of them, so there is one to replace."""
    oob = f"outerHTML:.note-proposal-{int(card.id)}"
    return _render("note_proposal_card.html", {"proposal": card, "notice": notice, "oob": oob})


def elicitations_replace(pending: list[Any]) -> str:
    """The rail's questions from MCP servers (`agent.elicitation.store.PendingElicitation`), with their forms."""
    inner = _render("elicitations.html", {"elicitations": pending})
    return format_html('<div hx-swap-oob="innerHTML:#elicitations">{}</div>', inner)


def elicitations_parts(pending: list[Any]) -> list[str]:
    """The rail's questions replaced whole or, when too large for one message, one card at a time."""
    whole = elicitations_replace(pending)
    if frame_fits(whole) or not pending:
        return [whole]
    first, *rest = pending
    cards = (
        _render("elicitation_card.html", {"elicitation": elicitation, "place": "rail", "oob": ""})
        for elicitation in rest
    )
    return [elicitations_replace([first])] + [
        format_html('<div hx-swap-oob="beforeend:#elicitation-list">{}</div>', card) for card in cards
    ]


def decisions_replace(decisions: list[Any]) -> str:
    """The approvals page's table of decisions taken in Hermes (`oikos.models.ApprovalDecision`), newest first."""
    return _render("decisions.html", {"decisions": decisions, "oob": True})


def context_meter_replace(context: Any) -> str:
    """The conversation's context meter (`agent.selectors.ContextInUse`, None for none yet)."""
    return _render("context_meter.html", {"context": context, "oob": True})


def budget_meter_replace(budget: dict[str, Any]) -> str:
    """The rail's meter of today's spend (`controlroom.selectors.budget_meter`)."""
    return _render("budget_meter.html", {"budget": budget, "oob": True})


def schedule_list_refresh() -> str:
    """An element that, once swapped in, makes the Schedules page fetch its list again."""
    return _render("schedule_refresh.html", {})


def schedule_runs_refresh(schedule_id: int) -> str:
    """An element that, once swapped in, makes a schedule's page fetch its runs again."""
    return _render("schedule_runs_refresh.html", {"schedule_id": schedule_id})


def digest_replace(card: DigestCard) -> str:
    """The home page's digest card, as it is now."""
    return _render("digest_card.html", {"digest": card, "oob": True})
