"""`manage.py a2a_talk <url> "opening message" [--max-turns N]`: Hermes talks with a peer agent.

The conversation is printed turn by turn on stdout; how it ended and the session id go to stderr.
Exit status: 0 the stop rule ended it, 1 a message or a turn failed, 2 refused before anything was
sent (not a configured peer, no model, bad configuration), 130 stopped by the operator (Ctrl-C).
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from agent.llm import NOT_CONFIGURED_MESSAGE, llm_configured
from agent.tools.config import MCPConfigError
from agent.tools.hub import tool_hub
from interop.peers import peers_from_settings
from interop.talk import ENDINGS, Line, Talk, TalkFailed, TalkOutcome

EXIT_FAILED = 1
EXIT_REFUSED = 2
EXIT_INTERRUPTED = 130


class Command(BaseCommand):
    help = "Hold a supervised conversation between Hermes and a peer agent over A2A."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("url", help="the peer: its name or its URL, as in the peers file (HERMES_A2A_PEERS)")
        parser.add_argument("opening", help="the first message to send")
        parser.add_argument("--max-turns", type=int, help="messages to send at most (capped by the peer's max_turns)")
        parser.add_argument("--actor", default="operator:cli", help="who supervises (recorded on the session)")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            peers = peers_from_settings()
        except MCPConfigError as exc:
            raise CommandError(str(exc), returncode=EXIT_REFUSED) from None
        peer = peers.find(options["url"])
        if peer is None:
            allowed = ", ".join(f"{p.name} ({p.origin})" for p in peers.peers) or "none (set HERMES_A2A_PEERS)"
            raise CommandError(
                f"{options['url']!r} is not a configured peer; nothing was sent. Peers: {allowed}",
                returncode=EXIT_REFUSED,
            )
        if not llm_configured():
            raise CommandError(NOT_CONFIGURED_MESSAGE, returncode=EXIT_REFUSED)
        max_turns = options["max_turns"] or peer.max_turns
        if max_turns < 1:
            raise CommandError("--max-turns must be at least 1", returncode=EXIT_REFUSED)
        self._peer_name = peer.name
        talk = Talk(peers=peers, peer=peer, actor=options["actor"], max_turns=max_turns, printer=self._print)
        try:
            code = asyncio.run(self._talk(talk, options["opening"]))
        except KeyboardInterrupt:
            self._report(talk.outcome)
            code = EXIT_INTERRUPTED
        if code:
            sys.exit(code)

    async def _talk(self, talk: Talk, opening: str) -> int:
        try:
            hub = tool_hub()
        except MCPConfigError as exc:
            raise CommandError(str(exc), returncode=EXIT_REFUSED) from None
        try:
            outcome = await talk.run(opening)
        except TalkFailed as failed:
            self.stderr.write(f"error: {failed.message}")
            self._report(talk.outcome)
            return EXIT_REFUSED if failed.nothing_sent and not talk.outcome.turns else EXIT_FAILED
        except asyncio.CancelledError:
            raise KeyboardInterrupt from None
        finally:
            await hub.aclose()
        self._report(outcome)
        return 0

    def _print(self, line: Line, turn: int, text: str) -> None:
        peer = self._peer_name
        heading = {
            "sent": f"[{turn}] hermes → {peer}",
            "received": f"[{turn}] {peer} → hermes",
            "unsent": f"[{turn}] hermes (not sent: the conversation is over)",
            "summary": "[summary] hermes",
        }[line]
        self.stdout.write(f"{heading}\n{text}\n")
        self.stdout.flush()

    def _report(self, outcome: TalkOutcome) -> None:
        reason = outcome.stop_reason or "error"
        why = ENDINGS.get(reason, "a failure")
        self.stderr.write(f"[stopped] {reason}: ended by {why} after {outcome.turns} message(s) sent")
        if outcome.session_id:
            self.stderr.write(f"session {outcome.session_id}")
