"""The SDK's `TokenStorage` on the database: one `McpCredential` row per server, sealed.

Every process (Daphne, the watcher, `ask`) reads the same row, so a server an operator connected
once serves every turn, and a refreshed token is the one the next process starts from. Every token
and client secret that passes through is registered with `common.redaction`, like a configured
header's: a server or tool that echoes one shows `[REDACTED]`, in results, the ledger and the logs.
"""

from __future__ import annotations

import datetime

from django.utils import timezone
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from agent.models import McpCredential
from agent.tools.oauth.sealing import SealBroken, seal, unseal
from common.redaction import secrets_register


class DbTokenStorage:
    """`mcp.client.auth.TokenStorage` for the server `server` at `server_url`.

    A row stored for another URL reads as empty: credentials are never presented to a server they
    were not obtained for. A row no configured secret key opens reads as empty too (and the flow
    obtains new ones) rather than failing every call.
    """

    def __init__(self, server: str, server_url: str, *, grant: str, operator: str = "") -> None:
        self.server = server
        self.server_url = server_url
        self.grant = grant
        # Who is connecting it now, recorded with the tokens this flow stores.
        self.operator = operator

    async def _row(self) -> McpCredential | None:
        row = await McpCredential.objects.filter(server=self.server).afirst()
        if row is None or row.server_url != self.server_url:
            return None
        return row

    async def _row_for_write(self) -> McpCredential:
        row, created = await McpCredential.objects.aget_or_create(
            server=self.server, defaults={"server_url": self.server_url, "grant": self.grant}
        )
        if not created and row.server_url != self.server_url:
            # Configured at another URL now: what was held for the old one is dropped, not reused.
            row.server_url, row.client_sealed, row.tokens_sealed = self.server_url, "", ""
            row.issuer = row.scope = row.connected_by = ""
            row.expires_at, row.refreshable = None, False
        row.grant = self.grant
        return row

    async def get_tokens(self) -> OAuthToken | None:
        row = await self._row()
        if row is None or not row.tokens_sealed:
            return None
        try:
            token = OAuthToken.model_validate_json(unseal(row.tokens_sealed))
        except SealBroken:
            return None
        _register(token)
        if row.expires_at is not None:
            # The SDK counts expiry from when it is told `expires_in`: tell it what is left.
            left = (row.expires_at - timezone.now()).total_seconds()
            token.expires_in = max(0, int(left))
        return token

    async def set_tokens(self, tokens: OAuthToken) -> None:
        _register(tokens)
        row = await self._row_for_write()
        row.tokens_sealed = seal(tokens.model_dump_json())
        row.scope = tokens.scope or ""
        row.expires_at = (
            timezone.now() + datetime.timedelta(seconds=int(tokens.expires_in))
            if tokens.expires_in is not None
            else None
        )
        row.refreshable = bool(tokens.refresh_token)
        if self.operator:
            row.connected_by = self.operator
        await row.asave()

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        row = await self._row()
        if row is None or not row.client_sealed:
            return None
        try:
            client_info = OAuthClientInformationFull.model_validate_json(unseal(row.client_sealed))
        except SealBroken:
            return None
        _register(client_info)
        return client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        _register(client_info)
        row = await self._row_for_write()
        row.client_sealed = seal(client_info.model_dump_json())
        row.issuer = client_info.issuer or ""
        await row.asave()


def _register(held: OAuthToken | OAuthClientInformationFull) -> None:
    if isinstance(held, OAuthToken):
        secrets_register(value for value in (held.access_token, held.refresh_token) if value)
    elif held.client_secret:
        secrets_register([held.client_secret])
