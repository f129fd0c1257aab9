"""Approvals: deciding one (from any card, inline or in the rail) and the approvals page."""

from __future__ import annotations

import uuid

from channels.db import database_sync_to_async
from django.http import (
    HttpRequest,
    HttpResponse,
    HttpResponseBadRequest,
    HttpResponseForbidden,
    HttpResponseNotFound,
)
from django.shortcuts import render
from django.views.decorators.http import require_GET, require_POST

from access.refusals import refusal_note
from agent.broadcast import changes_changed_publish
from agent.proposals import proposals_changed_publish, proposals_recent, undo_propose
from controlroom import fragments
from controlroom.forms import DecisionForm
from controlroom.identity import operator_name
from controlroom.views.context import DRAWER_SESSION_KEY, HtmxHttpRequest, conversation_context, redirect_back
from oikos import selectors as oikos_selectors
from oikos.approvals import approval_decide, approvals_listed
from oikos.change_view import change_view_get, undo_offered_as
from oikos.models import ApprovalDecision
from oikos.proposals import proposal_settle
from oikos.rail import ApprovalState
from oikos.relay import oikos_relay
from transcript.view import ApprovalItem


@require_POST
async def decide(request: HtmxHttpRequest) -> HttpResponse:
    """Approve or deny as the signed-in operator; answers with the cards of that approval redrawn.

    A refusal here is noted on the request: `controlroom.middleware` records it as an attempt.
    """
    operator = operator_name(request)
    if operator is None:
        message = "Deciding an approval needs an operator identity."
        refusal_note(request, "no_operator", message)
        return HttpResponseForbidden(message)
    form = DecisionForm(request.POST)
    if not form.is_valid():
        message = "Not a valid decision: " + "; ".join(form.errors.keys())
        refusal_note(request, "invalid_decision", message)
        return HttpResponseBadRequest(message)
    approval_id: str = form.cleaned_data["approval_id"]
    execution_id: str = form.cleaned_data["execution_id"]
    result = await approval_decide(
        approval_id=approval_id,
        execution_id=execution_id,
        approve=form.cleaned_data["decision"] == "approve",
        operator=operator,
        reason=form.cleaned_data["reason"],
    )
    relay = oikos_relay()
    if result.outcome == ApprovalDecision.Outcome.DECIDED:
        relay.approval_note(result.approval)
    known = await relay.approvals_lookup([(approval_id, execution_id)])
    card: ApprovalState | ApprovalItem | None = known.get(approval_id)
    if card is None and result.outcome != ApprovalDecision.Outcome.ALREADY_DECIDED:
        # Oikos does not confirm this approval: the card loses its buttons instead of offering them again.
        card = ApprovalItem(
            approval_id=approval_id, execution_id=execution_id, target="", action="", risk_class="", status=""
        )
        card.checked = True
    elif card is None:
        card = ApprovalState(approval_id=approval_id, execution_id=execution_id)
    if isinstance(card, ApprovalState) and result.outcome == ApprovalDecision.Outcome.ALREADY_DECIDED:
        # Oikos's word beats whatever this process heard last.
        card.status = "denied" if result.status == "denied" else "approved"
        if card.execution_status == "proposed":
            card.execution_status = card.status
        card.decided_by = result.decided_by
    if not request.htmx:
        return redirect_back(request, "controlroom:approvals")
    return HttpResponse(fragments.approval_cards_replace([card], notice=result.notice))


@require_POST
async def proposal_decide(request: HtmxHttpRequest, proposal_id: uuid.UUID) -> HttpResponse:
    """Approve (and so send to Oikos, as the signed-in operator) or reject a proposal; answers with its card."""
    operator = operator_name(request)
    if operator is None:
        message = "Deciding a proposal needs an operator identity."
        refusal_note(request, "no_operator", message)
        return HttpResponseForbidden(message)
    decision = request.POST.get("decision")
    if decision not in ("approve", "reject"):
        refusal_note(request, "invalid_decision", "Not a valid decision: decision")
        return HttpResponseBadRequest("Not a valid decision: decision is approve or reject.")
    result = await proposal_settle(proposal_id=proposal_id, approve=decision == "approve", operator=operator)
    if result.card is None:
        return HttpResponseNotFound(result.notice)
    undone = await database_sync_to_async(undo_offered_as)(proposal_id)
    if undone is not None:
        # The undo of a change was decided: its cards say "undone by …" once the rollback is on record.
        await changes_changed_publish(execution_id=undone.execution_id, session_id=undone.session_id or None)
    if not request.htmx:
        return redirect_back(request, "controlroom:approvals")
    return HttpResponse(fragments.proposal_card(result.card, notice=result.notice))


@require_GET
async def execution_record(request: HttpRequest, execution_id: str) -> HttpResponse:
    """Hermes's record of an execution as a card draws it (`partials/change_verdict.html`): a card
    drawn without it fetches it once drawn. Empty for an execution Hermes did not ask for."""
    record = await database_sync_to_async(change_view_get)(execution_id)
    if record is None:
        return HttpResponse("")
    return HttpResponse(fragments.change_record(record))


@require_POST
async def execution_undo(request: HtmxHttpRequest) -> HttpResponse:
    """Offer the way back from a finished execution as a proposal, as the signed-in operator.

    Nothing is sent to Oikos here: the proposal waits on the rail and the approvals page, and only
    an operator approving it (`proposal_decide`) sends it through Oikos's policy.
    """
    operator = operator_name(request)
    if operator is None:
        message = "Offering an undo needs an operator identity."
        refusal_note(request, "no_operator", message)
        return HttpResponseForbidden(message)
    # The form's own field (filled by controlroom.js) and, without scripts, the button's value.
    execution_id = next((value for value in request.POST.getlist("execution_id") if value), "")[:100]
    card = await database_sync_to_async(undo_propose)(execution_id=execution_id, proposed_by=operator)
    record = await database_sync_to_async(change_view_get)(execution_id)
    if card is None or record is None:
        refusal_note(request, "not_undoable", "Nothing to undo for this execution.")
        return HttpResponseBadRequest("Nothing to undo: Oikos cannot roll this execution back.")
    await proposals_changed_publish()
    await changes_changed_publish(execution_id=execution_id, session_id=record.session_id or None)
    if not request.htmx:
        return redirect_back(request, "controlroom:approvals")
    # Every drawing of this record in the page, redrawn with "undo offered".
    return HttpResponse(fragments.change_record(record, oob=True))


@require_GET
async def approvals_page(request: HttpRequest) -> HttpResponse:
    """Every approval Oikos knows (pending first) and the decisions taken from this control room."""
    approvals, problem = await approvals_listed()
    session = await request.session.aget(DRAWER_SESSION_KEY)
    drawer = await database_sync_to_async(conversation_context)(
        session_id=_uuid(session), place="drawer", follow_approvals=True
    )
    decisions = await database_sync_to_async(oikos_selectors.approval_decisions_recent)()
    proposed = await database_sync_to_async(proposals_recent)()
    context = {
        "operator": operator_name(request),
        "oikos_approvals": approvals,
        "pending_approvals": [a for a in approvals if a.pending] + drawer["pending_approvals"],
        "oikos_problem": problem,
        "decisions": decisions,
        "proposals": proposed,
        "drawer": drawer,
    }
    return render(request, "controlroom/approvals.html", context)


def _uuid(value: object) -> uuid.UUID | None:
    try:
        return uuid.UUID(str(value))
    except ValueError:
        return None
