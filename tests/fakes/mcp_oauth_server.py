"""An MCP server behind its own OAuth authorization server, on the SDK's server auth support.

`OAuthMCPTestServer` serves, on one 127.0.0.1 port: the authorization server (metadata, dynamic
client registration, `/authorize`, `/token` with PKCE and rotating refresh tokens — the SDK's
handlers over `AutoApprovingProvider`) and the protected MCP server at `/mcp` (the mini Oikos
tools; `whoami()` says which client the token was issued to). `/authorize` approves at once and
redirects back with a code, as a real one does after its login page: the test is the browser.

`token_lifetime` sets how long access tokens live, so a test can make one expire; `grants` counts
the token requests by grant type; `revoke_all()` forgets every token (a revoked grant).
"""

from __future__ import annotations

import secrets
import time
from collections import Counter

from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    RefreshToken,
    construct_redirect_uri,
)
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions
from mcp.server.mcpserver import MCPServer
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from pydantic import AnyHttpUrl

from tests.fakes.mcp_servers import MCPTestServer, build_mini_oikos

SCOPE = "oikos:read"


class AutoApprovingProvider:
    """`OAuthAuthorizationServerProvider` in memory; every authorization request is approved."""

    def __init__(self, *, token_lifetime: int) -> None:
        self.token_lifetime = token_lifetime
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.access: dict[str, AccessToken] = {}
        self.refresh: dict[str, RefreshToken] = {}
        self.grants: Counter[str] = Counter()

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        assert client_info.client_id is not None
        self.clients[client_info.client_id] = client_info

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        code = secrets.token_urlsafe(24)
        self.codes[code] = AuthorizationCode(
            code=code,
            scopes=params.scopes or [SCOPE],
            expires_at=time.time() + 300,
            client_id=str(client.client_id),
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
        )
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state)

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> AuthorizationCode | None:
        return self.codes.get(authorization_code)

    def _issue(self, client_id: str, scopes: list[str], resource: str | None) -> OAuthToken:
        access, refresh = f"at-{secrets.token_urlsafe(24)}", f"rt-{secrets.token_urlsafe(24)}"
        expires_at = int(time.time()) + self.token_lifetime
        self.access[access] = AccessToken(
            token=access, client_id=client_id, scopes=scopes, expires_at=expires_at, resource=resource
        )
        self.refresh[refresh] = RefreshToken(token=refresh, client_id=client_id, scopes=scopes, resource=resource)
        return OAuthToken(
            access_token=access,
            token_type="Bearer",
            expires_in=self.token_lifetime,
            refresh_token=refresh,
            scope=" ".join(scopes),
        )

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        self.codes.pop(authorization_code.code, None)
        self.grants["authorization_code"] += 1
        return self._issue(str(client.client_id), authorization_code.scopes, authorization_code.resource)

    async def load_refresh_token(self, client: OAuthClientInformationFull, refresh_token: str) -> RefreshToken | None:
        return self.refresh.get(refresh_token)

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        self.refresh.pop(refresh_token.token, None)
        self.grants["refresh_token"] += 1
        return self._issue(str(client.client_id), scopes or refresh_token.scopes, refresh_token.resource)

    async def load_access_token(self, token: str) -> AccessToken | None:
        access = self.access.get(token)
        if access is None or (access.expires_at is not None and access.expires_at < time.time()):
            return None
        return access

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        self.access.pop(token.token, None)
        self.refresh.pop(token.token, None)


class OAuthMCPTestServer(MCPTestServer):
    """The mini Oikos at `/mcp`, its authorization server at the same origin (see the module docstring)."""

    def __init__(self, *, token_lifetime: int = 3600) -> None:
        super().__init__()
        self.provider = AutoApprovingProvider(token_lifetime=token_lifetime)
        self.build = self._build

    def __enter__(self) -> OAuthMCPTestServer:
        self.start()
        return self

    @property
    def issuer(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def grants(self) -> Counter[str]:
        return self.provider.grants

    def revoke_all(self) -> None:
        self.provider.access.clear()
        self.provider.refresh.clear()

    def _build(self, token: str | None = None) -> MCPServer:
        """The server as `MCPTestServer` starts it: built once the port (and so the issuer) is known."""
        auth = AuthSettings(
            issuer_url=AnyHttpUrl(self.issuer),
            resource_server_url=AnyHttpUrl(self.url),
            client_registration_options=ClientRegistrationOptions(
                enabled=True, valid_scopes=[SCOPE], default_scopes=[SCOPE]
            ),
            required_scopes=[SCOPE],
            validate_token_resource=False,
        )
        return build_mini_oikos(oauth=(self.provider, auth))
