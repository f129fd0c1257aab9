"""A supervised conversation between Hermes and a peer agent (`manage.py a2a_talk`).

The operator's opening goes to the peer; each reply is read by a Hermes turn (the reply fenced as
untrusted, the turn unable to call the peer back), whose answer is sent as the next message, until
the stop rule ends it: the agreed stop marker (from either side), the turn cap, no progress (a reply
repeating the previous one, or Hermes repeating itself), a terminal remote state, the wall-clock
budget, or the operator (Ctrl-C). When the peer had the last word, a final turn reads it and sums
the conversation up, so the whole exchange lives in one Hermes session; every message sent and its
reply is in the ledger (tool `a2a_send`) under the turn that read the reply.
"""

from __future__ import annotations

import asyncio
import datetime
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from channels.db import database_sync_to_async
from django.utils import timezone

from agent.engine.runner import TurnHandle
from agent.live import turn_start_unfollowed
from agent.store import ledger
from interop import services
from interop.outbound import SendRefusal, SendResult, conversation_send, replies_same, stop_marker_in
from interop.peers import Peer, PeerBook
from interop.tool import STOP_REASONS, send_result_record
from interop.turns import TurnAnswer, turn_answer
from interop.untrusted import untrusted_wrap

OPENING_NOTE = (
    "\n\n[This is an automated conversation between AI agents, supervised by an operator. When you consider "
    "it finished, end your message with {marker}.]"
)
# What ended a conversation, for the operator.
ENDINGS = {
    "stop_marker": "the agreed stop marker",
    "turn_cap": "the turn cap",
    "no_progress": "no progress (a repeated message)",
    "remote_state": "the peer's task ending",
    "wall_clock": "the conversation's time budget",
    "closed": "an earlier stop",
    "operator": "the operator",
    "failed": "a failure",
}
# Refusals that are the stop rule ending the conversation, not failures.
RULE_STOPS = frozenset({"turn_cap", "wall_clock", "closed"})
# Refusals that happen before anything goes on the wire.
# (`forbidden_address`: the peer's address was refused before any connection.)
NOTHING_SENT = frozenset(
    {"not_allowed", "depth_guard", "invalid_message", "too_long", "rate_limited", "forbidden_address"}
)
CUT_NOTE = "\n[cut to fit the peer's limit]"

Line = Literal["sent", "received", "unsent", "summary"]
Printer = Callable[[Line, int, str], None]


@dataclass
class TalkOutcome:
    stop_reason: str = ""
    turns: int = 0  # messages sent to the peer
    session_id: uuid.UUID | None = None
    thread_id: str = ""
    conversation_id: uuid.UUID | None = None


class TalkFailed(Exception):
    """A message or a turn failed; `nothing_sent` when the message never left Hermes."""

    def __init__(self, message: str, *, nothing_sent: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.nothing_sent = nothing_sent


class Talk:
    def __init__(self, *, peers: PeerBook, peer: Peer, actor: str, max_turns: int, printer: Printer) -> None:
        self.peers = peers
        self.peer = peer
        self.actor = actor
        self.max_turns = min(max_turns, peer.max_turns)
        self.printer = printer
        self.outcome = TalkOutcome()
        self._last_answer = ""
        self._turn: TurnHandle | None = None

    async def run(self, opening: str) -> TalkOutcome:
        """Talk until the stop rule ends it. Raises `TalkFailed` when a message or a turn fails."""
        try:
            return await self._talk(opening)
        except TalkFailed:
            await self._stop("failed")
            raise
        except asyncio.CancelledError:
            await self._operator_stop()
            raise

    async def _talk(self, opening: str) -> TalkOutcome:
        message = opening.strip() + OPENING_NOTE.format(marker=self.peer.stop_marker)
        if len(message) > self.peer.max_chars:
            raise TalkFailed(
                f"the opening has {len(message):,} characters with the protocol note; {self.peer.name} takes at most "
                f"{self.peer.max_chars:,}",
                nothing_sent=True,
            )
        while True:
            try:
                result = await self._send(message)
            except SendRefusal as refusal:
                if refusal.kind in RULE_STOPS:
                    self.outcome.stop_reason = refusal.kind
                    return self.outcome
                raise TalkFailed(
                    f"{refusal.kind}: {refusal.message}", nothing_sent=refusal.kind in NOTHING_SENT
                ) from None
            stop = result.stop_reason or ("turn_cap" if self.outcome.turns >= self.max_turns else "")
            if stop:
                self.outcome.stop_reason = stop
                await self._stop(stop)
                summary = await self._read(result, self._closing_prompt(result, stop))
                self.printer("summary", self.outcome.turns, summary.text)
                return self.outcome
            answer = await self._read(result, self._reply_prompt(result, opening))
            own_stop = self._own_stop(answer.text)
            if own_stop:
                self.outcome.stop_reason = own_stop
                await self._stop(own_stop)
                self.printer("unsent", self.outcome.turns, answer.text)
                return self.outcome
            self._last_answer = answer.text
            message = self._fit(answer.text)

    def _fit(self, text: str) -> str:
        """Hermes's answer within the peer's character cap (the turn was asked to stay under it)."""
        limit = self.peer.max_chars
        return text if len(text) <= limit else text[: limit - len(CUT_NOTE)] + CUT_NOTE

    async def _send(self, message: str) -> SendResult:
        self.printer("sent", self.outcome.turns + 1, message)
        result = await conversation_send(
            peers=self.peers,
            target=self.peer.name,
            message=message,
            thread_id=self.outcome.thread_id or None,
            session_id=self.outcome.session_id,
        )
        self.outcome.turns += 1
        self.outcome.thread_id = result.thread_id
        self.outcome.conversation_id = result.conversation_id
        self.printer("received", self.outcome.turns, result.reply)
        return result

    def _reply_prompt(self, result: SendResult, opening: str) -> str:
        opened = f' Your operator opened it with: "{opening.strip()}".' if self.outcome.turns == 1 else ""
        header = (
            f'[Hermes: you are in a conversation with the peer agent "{self.peer.name}", supervised by your '
            f"operator.{opened} Your reply will be sent to {self.peer.name} as message {self.outcome.turns + 1} of "
            f"at most {self.max_turns}. Reply in plain text, under {self.peer.max_chars:,} characters. When the "
            "conversation has reached its goal, or nothing useful is left to say, end your reply with "
            f"{self.peer.stop_marker}.]"
        )
        return header + "\n\n" + untrusted_wrap(result.reply or "(no text)", source=self.peer.name)

    def _closing_prompt(self, result: SendResult, reason: str) -> str:
        why = STOP_REASONS.get(reason, reason).format(state=result.state, max_turns=self.max_turns)
        header = (
            f'[Hermes: the conversation with the peer agent "{self.peer.name}" has ended: {why}. Nothing more will '
            "be sent. Their last message is below. Sum up for your operator, in a few lines, what came out of the "
            "conversation.]"
        )
        return header + "\n\n" + untrusted_wrap(result.reply or "(no text)", source=self.peer.name)

    def _own_stop(self, answer: str) -> str:
        if stop_marker_in(answer, self.peer):
            return "stop_marker"
        if self._last_answer and replies_same(answer, self._last_answer):
            return "no_progress"
        return ""

    async def _read(self, result: SendResult, text: str) -> TurnAnswer:
        """Run the Hermes turn that reads `result`'s reply; the ledger records the exchange under it."""
        self._turn = await turn_start_unfollowed(
            text=text,
            actor=self.actor,
            origin="a2a",
            session_id=self.outcome.session_id,
            origin_peer=self.peer.name,
        )
        await self._ledger(self._turn, result)
        answer = await turn_answer(self._turn)
        self._turn = None
        if answer.status != "done":
            raise TalkFailed(f"Hermes's turn failed ({answer.error_code or answer.status}): {answer.error}")
        return answer

    async def _ledger(self, handle: TurnHandle, result: SendResult) -> None:
        if self.outcome.session_id is None:
            self.outcome.session_id = handle.session_id
            await database_sync_to_async(services.conversation_session_attach)(
                conversation_id=result.conversation_id, session_id=handle.session_id
            )
        await database_sync_to_async(services.exchange_turn_attach)(
            exchange_id=result.exchange_id, turn_id=handle.turn_id
        )
        call = ledger.LedgerCall(
            correlation_id=handle.turn_id,
            session_id=handle.session_id,
            actor=self.actor,
            tool_use_id="",
            server="hermes",
            tool="a2a_send",
            arguments={"url": self.peer.url, "message": result.message, "task_id": result.thread_id},
            started_at=timezone.now() - datetime.timedelta(milliseconds=result.duration_ms),
        )
        await database_sync_to_async(ledger.activity_record)(
            call=call, result=send_result_record(result), is_error=False, duration_ms=result.duration_ms
        )

    async def _stop(self, reason: str) -> None:
        if self.outcome.conversation_id is not None:
            await database_sync_to_async(services.conversation_stop)(
                conversation_id=self.outcome.conversation_id, reason=reason
            )

    async def _operator_stop(self) -> None:
        """Ctrl-C: stop the turn in flight (keeping what it said) and close the conversation."""
        self.outcome.stop_reason = "operator"
        if self._turn is not None:
            self._turn.cancel()
            await self._turn.wait()
        await self._stop("operator")
