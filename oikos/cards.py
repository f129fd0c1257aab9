"""What an approval card says besides the action: why Hermes asked, where, and what is at stake.

Plain values that every frontend showing a card reads (the rail, the conversation, the Approvals
page, and text-only ones such as a chat bridge through `CardContext.summary_lines`). They are
loaded by `oikos.card_context`; nothing here touches the database or Oikos. Every string in
them came from the model or from Oikos: untrusted, escaped wherever it is shown.
"""

from __future__ import annotations

import datetime
import uuid
from dataclasses import dataclass, field
from typing import Any

from django.urls import reverse

from common import dom

# How many dependants the one-line summary names before "…"; the full list is one click away.
AFFECTS_NAMED = 3
# Recent executions of the target a card lists.
EXECUTIONS_SHOWN = 5
NO_REASON = "no reason given"
BLAST_UNAVAILABLE = "blast radius unavailable"
EXECUTIONS_UNAVAILABLE = "recent executions unavailable"


@dataclass(frozen=True)
class CardOrigin:
    """The conversation turn whose `request_execution` raised the approval."""

    session_id: str
    turn_id: str
    # The operator's question that started the turn.
    question: str
    # The `reason` argument the model passed to `request_execution` ("" when it passed none).
    reason: str

    @property
    def url(self) -> str:
        """The session, scrolled to the turn (its `<article>` id is the anchor)."""
        session = reverse("controlroom:session", kwargs={"session_id": uuid.UUID(self.session_id)})
        return f"{session}#{dom.turn_dom_id(self.turn_id)}"


@dataclass(frozen=True)
class TargetFacts:
    """What Oikos said about one target when a card last asked (cached per target)."""

    target: str
    # `[{slug, depth, via, type, health}]`, nearest first.
    blast_radius: list[dict[str, Any]] = field(default_factory=list)
    # `[{execution_id, action, status, requested_by, requested_at, finished_at}]`, newest first.
    executions: list[dict[str, Any]] = field(default_factory=list)
    blast_problem: str = ""
    executions_problem: str = ""
    fetched_at: datetime.datetime | None = None

    @property
    def ok(self) -> bool:
        return not self.blast_problem and not self.executions_problem


@dataclass(frozen=True)
class CardContext:
    """Everything a card shows beyond Oikos's approval record; see the module docstring."""

    origin: CardOrigin | None = None
    facts: TargetFacts | None = None
    # The target's executions other than this approval's own, newest first.
    executions: list[dict[str, Any]] = field(default_factory=list)

    @property
    def blast_radius(self) -> list[dict[str, Any]]:
        return self.facts.blast_radius if self.facts else []

    @property
    def blast_unavailable(self) -> bool:
        return self.facts is not None and bool(self.facts.blast_problem)

    @property
    def executions_unavailable(self) -> bool:
        return self.facts is not None and bool(self.facts.executions_problem)

    @property
    def affects_line(self) -> str:
        """`affects 3: service:a, service:b, service:c` (… when more); "" before Oikos answered."""
        if self.facts is None:
            return ""
        if self.facts.blast_problem:
            return BLAST_UNAVAILABLE
        slugs = [str(entry.get("slug", "")) for entry in self.blast_radius]
        if not slugs:
            return "affects nothing else"
        named = ", ".join(slugs[:AFFECTS_NAMED])
        return f"affects {len(slugs)}: {named}" + ("…" if len(slugs) > AFFECTS_NAMED else "")

    def summary_lines(self, *, reason: str) -> list[str]:
        """The card's context as plain text lines, for frontends that cannot show HTML."""
        lines = [f"reason: {reason or NO_REASON}"]
        if self.origin is not None:
            lines.append(f"asked: {self.origin.question} ({self.origin.url})")
        if self.facts is not None:
            lines.append(self.affects_line)
            if self.facts.executions_problem:
                lines.append(EXECUTIONS_UNAVAILABLE)
            elif self.executions:
                recent = ", ".join(f"{e.get('action', '')} {e.get('status', '')}" for e in self.executions)
                lines.append(f"recently: {recent}")
            else:
                lines.append("no recent executions")
        return lines


def card_context_for(*, execution_id: str, origin: CardOrigin | None, facts: TargetFacts | None) -> CardContext:
    """A card's context: its own execution is not "recent history" of the target."""
    executions = [] if facts is None else [e for e in facts.executions if e.get("execution_id") != execution_id]
    return CardContext(origin=origin, facts=facts, executions=executions[:EXECUTIONS_SHOWN])


def card_origin_of_turn(*, session_id: str, turn_id: str, question: str, arguments: dict[str, Any]) -> CardOrigin:
    """The origin of a card drawn inside its own turn (the transcript knows it without the ledger)."""
    reason = arguments.get("reason")
    return CardOrigin(
        session_id=session_id, turn_id=turn_id, question=question, reason=reason if isinstance(reason, str) else ""
    )
