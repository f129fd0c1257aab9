"""`manage.py a2a_pair <peer>`: issue a pairing token a peer agent uses to call Hermes over A2A.

The token is printed once, on stdout alone (so `a2a_pair lab > token` works); only its digest is
stored. `--revoke` revokes every token of the peer instead (the admin can revoke single tokens).
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from interop.peers import PEER_NAME
from interop.services import pairing_token_issue, pairing_tokens_revoke


class Command(BaseCommand):
    help = "Issue (or revoke) the A2A pairing token of a peer agent."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("peer", help="the peer's name, as its turns will be recorded (peer:<name>)")
        parser.add_argument("--revoke", action="store_true", help="revoke every token of this peer instead")

    def handle(self, *args: Any, **options: Any) -> None:
        peer: str = options["peer"]
        if not PEER_NAME.match(peer):
            raise CommandError("a peer name is 1-64 letters, digits, '.', '_' or '-'")
        if options["revoke"]:
            count = pairing_tokens_revoke(peer=peer)
            self.stderr.write(f"Revoked {count} token(s) of {peer}; its calls now get 401.")
            return
        token = pairing_token_issue(peer=peer)
        self.stdout.write(token)
        self.stderr.write(
            f"Give this token to {peer}; it sends it as 'Authorization: Bearer <token>'. It is shown only now. "
            f"Revoke it in the admin (Pairing tokens) or with: manage.py a2a_pair {peer} --revoke"
        )
