"""Loading an approval card's context: the turn that raised it, and what Oikos says about its target.

`approval_contexts` is the one entry point, for every frontend that shows cards (the control room's
rail, conversation and Approvals page through `approval_contexts_attach`; a chat bridge directly).

The blast radius and the target's recent executions are fetched by Hermes from Oikos's REST API —
never by the model, which could leave them out or make them up — when a card is raised (the relay
loads them as soon as it hears of an approval), and kept per target for `HERMES_CARD_CONTEXT_TTL`
seconds in the database (`TargetContext`), so drawing a card again, in any process, does not ask
Oikos again. Each fetch is bounded by `HERMES_CARD_CONTEXT_TIMEOUT`; a failure becomes "blast radius
unavailable" on the card and never reaches the code that raises or decides the approval.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Iterable, Sequence
from typing import Any, Protocol, TypeVar

from channels.db import database_sync_to_async
from django.conf import settings
from django.utils import timezone

from oikos import selectors, services
from oikos.cards import CardContext, TargetFacts, card_context_for
from oikos.client import OikosClient, OikosError

logger = logging.getLogger(__name__)

# A failed fetch is not retried for this long (capped by the TTL itself).
FAILURE_TTL_SECONDS = 15.0
BLAST_DEPTH = 3
EXECUTIONS_FETCHED = 6
# Fields of an execution a card keeps: what ran, how it ended, who asked, when.
EXECUTION_FIELDS = ("execution_id", "action", "status", "requested_by", "requested_at", "finished_at")
BLAST_FIELDS = ("slug", "depth", "via", "type", "health")

T = TypeVar("T")


class Card(Protocol):
    """What the loader reads and fills on a card (`ApprovalState` or a transcript's `ApprovalItem`)."""

    approval_id: str
    execution_id: str
    target: str
    reason: str
    context: CardContext | None


async def approval_contexts(cards: Iterable[tuple[str, str, str]]) -> dict[str, CardContext]:
    """The context of each card given as `(approval_id, execution_id, target)`, by approval id.

    Never raises for Oikos's sake: what could not be fetched in time says so in the context.
    """
    cards = list(cards)
    if not cards:
        return {}
    origins = await database_sync_to_async(selectors.approval_origins)(approval_ids=[c[0] for c in cards])
    facts = await target_facts(target for _, _, target in cards if target)
    return {
        approval_id: card_context_for(
            execution_id=execution_id, origin=origins.get(approval_id), facts=facts.get(target)
        )
        for approval_id, execution_id, target in cards
    }


async def approval_contexts_attach(cards: Sequence[Card]) -> None:
    """Load and set `context` on each card; a card without a reason takes the one its turn passed.

    A card that already knows its origin (a transcript card knows its own turn) keeps it when the
    ledger has none to offer.
    """
    contexts = await approval_contexts((card.approval_id, card.execution_id, card.target) for card in cards)
    for card in cards:
        context = contexts[card.approval_id]
        if context.origin is None and card.context is not None and card.context.origin is not None:
            context = CardContext(origin=card.context.origin, facts=context.facts, executions=context.executions)
        card.context = context
        if not card.reason and context.origin is not None:
            card.reason = context.origin.reason


async def target_facts(targets: Iterable[str]) -> dict[str, TargetFacts]:
    """What Oikos says about each target: from the cache when fresh, else fetched (concurrently)."""
    wanted = sorted(set(targets))
    if not wanted:
        return {}
    ttl = float(settings.HERMES_CARD_CONTEXT_TTL)
    cached = await database_sync_to_async(selectors.target_facts_cached)(
        targets=wanted, ttl=ttl, failure_ttl=FAILURE_TTL_SECONDS
    )
    missing = [target for target in wanted if target not in cached]
    fetched = await asyncio.gather(*(target_facts_fetch(target) for target in missing))
    for facts in fetched:
        try:
            await database_sync_to_async(services.target_facts_store)(facts=facts)
        except Exception:  # a card shows what was fetched even when it could not be kept
            logger.exception("Could not store the card context of %s", facts.target)
    return cached | {facts.target: facts for facts in fetched}


async def target_facts_fetch(target: str) -> TargetFacts:
    """Ask Oikos now for `target`'s blast radius and recent executions, each bounded in time."""
    try:
        oikos = OikosClient.from_settings()
    except OikosError as problem:
        return TargetFacts(
            target=target, blast_problem=str(problem), executions_problem=str(problem), fetched_at=timezone.now()
        )
    async with oikos:
        (blast, blast_problem), (executions, executions_problem) = await asyncio.gather(
            _bounded(oikos.blast_radius(target, depth=BLAST_DEPTH)),
            _bounded(oikos.executions_recent(target=target, limit=EXECUTIONS_FETCHED)),
        )
    return TargetFacts(
        target=target,
        blast_radius=[_fields(entry, BLAST_FIELDS) for entry in blast or []],
        executions=[_fields(entry, EXECUTION_FIELDS) for entry in executions or []],
        blast_problem=blast_problem,
        executions_problem=executions_problem,
        fetched_at=timezone.now(),
    )


async def _bounded(call: Awaitable[T]) -> tuple[T | None, str]:
    """The call's answer, or why there is none (Oikos failed, or was slower than allowed)."""
    timeout = float(settings.HERMES_CARD_CONTEXT_TIMEOUT)
    try:
        async with asyncio.timeout(timeout):
            return await call, ""
    except TimeoutError:
        return None, f"Oikos did not answer within {timeout:g} s."
    except OikosError as problem:
        return None, str(problem)


def _fields(entry: dict[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
    # Only what a card shows is kept; values stay as Oikos sent them (escaped when shown).
    return {name: entry.get(name) for name in names if entry.get(name) is not None}
