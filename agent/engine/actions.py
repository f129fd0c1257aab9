"""Who may cause an action, at the moment a turn asks for one.

The hub already keeps a turn to the tools its provenance allows (`agent.tools.provenance`); this is
the engine's side, for the one call that changes anything — the Oikos server's `request_execution`:

- **A turn that may only propose** (a peer's, an investigation's, when configured) never sends it:
  the call is stored as a proposal for an operator (`agent.proposals`), and the model is told so.
- **An operator's turn that has read untrusted text** since the operator spoke — any tool's result
  (a log line, a peer's reply, a web page) — asks the operator first, through the turn's elicitor,
  with a `confirmation`: where the instruction may have come from, and exactly what would run. A
  poisoned log line that says "restart X" reaches the operator as a question, not Oikos as a
  request. A frontend with nobody to ask (Matrix, a script) declines: the turn hears "not
  confirmed". Each action is asked about once per turn.
- The one exception: the operator's own message is a single command naming exactly that action and
  target ("restart service:caddy"): they said it themselves, whatever the turn read since.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any, Protocol

from agent import proposals
from agent.conversation.outcomes import ToolOutcome
from agent.conversation.results import tool_error_blocks, tool_error_record
from agent.elicitation.types import ElicitationAnswer, ElicitationAsk, Elicitor
from agent.tools.hub import ToolSpec
from agent.tools.provenance import Capability, origin_is_operator, tool_is_execution_request
from common.db import db_call

CONFIRMATION = "confirmation"
# Polite words an operator's single command may carry around the action and its target.
_FILLER = frozenset({"please", "now", "pls"})
_WORD = re.compile(r"[^\s.!,;]+")


class GateState(Protocol):
    """What the gate reads of the turn (`agent.engine.loop.TurnState`)."""

    session_id: Any
    turn_id: Any
    actor: str
    origin: str
    capability: Capability
    question: str


class ActionGate:
    """The confirmations and proposals of one turn."""

    def __init__(self, *, state: GateState, elicitor: Elicitor, oikos_server: str) -> None:
        self.state = state
        self.elicitor = elicitor
        self.oikos_server = oikos_server
        # What the turn has read that it does not trust since the operator spoke, in reading order.
        self.sources: list[str] = []
        if not origin_is_operator(state.origin):
            # Nobody at Hermes wrote the question: a peer's message, a signal's text.
            self.sources.append(
                f"the message that started this turn ({state.origin or 'unknown origin'}, {state.actor})"
            )
        # Per action (target, action, params): the operator's answer, asked once per turn.
        self._confirmed: dict[str, asyncio.Future[ElicitationAnswer]] = {}

    def untrusted_read(self, source: str) -> None:
        """The model has read `source` (a tool's result): what it asks for next may come from it."""
        if source not in self.sources:
            self.sources.append(source)

    async def hold(self, spec: ToolSpec, arguments: dict[str, Any], *, tool_use_id: str) -> ToolOutcome | None:
        """The outcome standing in for the call when it must not go to its server now; None: go ahead."""
        if not tool_is_execution_request(server=spec.server, tool=spec.tool, oikos_server=self.oikos_server):
            return None
        if self.state.capability == "propose":
            return await self._propose(spec, arguments, tool_use_id=tool_use_id)
        if self.state.capability != "write" or not self.sources or self._operator_said(arguments):
            return None  # a read-only turn's call is refused by the hub itself
        answer = await self._confirmation(spec, arguments, tool_use_id=tool_use_id)
        if answer.action == "accept":
            return None
        why = answer.reason or f"{answer.answered_by} chose not to run it"
        text = (
            f"Not run: {spec.tool} needed the operator's confirmation, because this turn had read text Hermes "
            f"does not trust, and it was not confirmed ({why}). Do not retry it; tell the operator what you "
            "wanted to run, and why, and let them decide."
        )
        return _refusal("not_confirmed", text)

    def _operator_said(self, arguments: dict[str, Any]) -> bool:
        """Whether the operator's own message is one command naming exactly this action and target."""
        if not origin_is_operator(self.state.origin):
            return False
        action, target = str(arguments.get("action") or "").lower(), str(arguments.get("target") or "").lower()
        if not action or not target:
            return False
        words = [word for word in _WORD.findall(self.state.question.lower()) if word not in _FILLER]
        return words in ([action, target], [action, target.partition(":")[2] or target])

    async def _confirmation(self, spec: ToolSpec, arguments: dict[str, Any], *, tool_use_id: str) -> ElicitationAnswer:
        key = json.dumps([arguments.get("target"), arguments.get("action"), arguments.get("params")], sort_keys=True)
        asked = self._confirmed.get(key)
        if asked is None:
            asked = self._confirmed[key] = asyncio.ensure_future(self._ask(spec, arguments, tool_use_id=tool_use_id))
        return await asyncio.shield(asked)

    async def _ask(self, spec: ToolSpec, arguments: dict[str, Any], *, tool_use_id: str) -> ElicitationAnswer:
        what = " ".join(str(arguments.get(key) or "") for key in ("action", "target")).strip() or spec.tool
        message = (
            f"Run {what}? Hermes is about to send {spec.server}/{spec.tool} {json.dumps(arguments, sort_keys=True)}. "
            f"Since your last message it has read text it does not trust, where this instruction may come from: "
            f"{'; '.join(self.sources)}."
        )
        ask = ElicitationAsk(
            server=spec.server,
            tool=spec.tool,
            message=message,
            requested_schema={"type": "object", "properties": {}},
            fields=(),
            tool_use_id=tool_use_id,
            purpose=CONFIRMATION,
        )
        return await self.elicitor(ask)

    async def _propose(self, spec: ToolSpec, arguments: dict[str, Any], *, tool_use_id: str) -> ToolOutcome:
        card = await db_call(
            proposals.proposal_open,
            correlation_id=self.state.turn_id,
            session_id=self.state.session_id,
            proposed_by=self.state.actor,
            origin=self.state.origin,
            tool_use_id=tool_use_id,
            server=spec.server,
            tool=spec.tool,
            arguments=arguments,
            sources=list(self.sources),
        )
        await proposals.proposals_changed_publish()
        text = (
            f"Proposed, not run: proposal {card.id} waits for an operator in Hermes. Nothing reaches "
            f"{spec.server} unless an operator approves it; do not propose it again."
        )
        record = {"proposal_id": card.id, "status": card.status, "text": text}
        return ToolOutcome(
            content=[{"type": "text", "text": text}],
            is_error=False,
            record=record,
            structured={"proposal_id": card.id, "status": "proposed_in_hermes"},
            duration_ms=0,
        )


def _refusal(kind: str, text: str) -> ToolOutcome:
    return ToolOutcome(
        content=tool_error_blocks(text),
        is_error=True,
        record=tool_error_record(kind, text),
        structured=None,
        duration_ms=0,
    )
