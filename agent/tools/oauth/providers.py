"""The SDK's OAuth provider for a configured server, as an `httpx2.Auth` for its connection.

Authorization code with PKCE (`OAuthClientProvider`) for servers an operator connects once; client
credentials (`ClientCredentialsOAuthProvider`, or `PrivateKeyJWTOAuthProvider` with a key) for
service accounts. Discovery, registration, scope selection, PKCE, refresh and step-up are the SDK's;
Hermes adds where tokens live (`DbTokenStorage`), who the browser is (`Browser`), and what a process
with no operator does when a server needs one: it stops with `OAuthConnectNeeded` instead of
registering clients or opening authorization requests nobody will complete.
"""

from __future__ import annotations

from typing import Literal, Protocol

import httpx2
from mcp.client.auth import OAuthClientProvider, TokenStorage
from mcp.client.auth.extensions.client_credentials import (
    ClientCredentialsOAuthProvider,
    PrivateKeyJWTOAuthProvider,
    SignedJWTParameters,
)
from mcp.client.auth.oauth2 import OAuthContext
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata
from pydantic import AnyUrl

from agent.tools.config import ServerConfig
from agent.tools.oauth.settings import OAuthConfig
from agent.tools.oauth.storage import DbTokenStorage

# Where an operator connects an authorization-code server; named in every "not connected" message.
SERVERS_PAGE = "/ui/servers/"


class OAuthConnectNeeded(Exception):
    """The server needs an operator to authorize Hermes, and this process has none."""

    def __init__(self, server: str) -> None:
        super().__init__(
            f"MCP server {server!r} is not connected: an operator connects it once "
            f"from the control room ({SERVERS_PAGE})"
        )


class Browser(Protocol):
    """Who takes an authorization URL to the authorization server and brings the answer back."""

    async def redirect(self, authorization_url: str) -> None: ...

    async def callback(self) -> AuthorizationCodeResult: ...


def _expiry_from_storage(context: OAuthContext) -> None:
    """Tokens loaded from storage keep their expiry: the SDK only counts one from a token response,
    so without this a stored, expired token would be sent (and answered 401) instead of refreshed."""
    tokens = context.current_tokens
    if tokens is not None and tokens.expires_in is not None:
        context.update_token_expiry(tokens)


class AuthorizationCodeProvider(OAuthClientProvider):
    """Authorization code with PKCE; with `browser=None` (a turn, a watcher) it only uses and
    refreshes what an operator's connect stored, and says so when there is nothing."""

    def __init__(
        self,
        config: ServerConfig,
        oauth: OAuthConfig,
        storage: TokenStorage,
        *,
        browser: Browser | None,
        redirect_uri: str | None,
    ) -> None:
        metadata = OAuthClientMetadata(
            client_name=oauth.client_name,
            redirect_uris=[AnyUrl(redirect_uri)] if redirect_uri else None,
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            scope=oauth.scope,
            token_endpoint_auth_method=_auth_method(oauth),  # type: ignore[arg-type]
        )
        super().__init__(
            config.url,
            metadata,
            storage,
            redirect_handler=browser.redirect if browser else self._no_operator,
            callback_handler=browser.callback if browser else self._no_operator_callback,
            client_metadata_url=oauth.client_metadata_url,
        )
        self.server = config.name
        self.oauth = oauth
        self.interactive = browser is not None

    async def _initialize(self) -> None:
        await super()._initialize()
        context = self.context
        _expiry_from_storage(context)
        if self.oauth.client_id is not None:
            # A pre-registered client: what the configuration says, never a registration.
            context.client_info = OAuthClientInformationFull(
                client_id=self.oauth.client_id,
                client_secret=self.oauth.client_secret,
                redirect_uris=context.client_metadata.redirect_uris,
                token_endpoint_auth_method=context.client_metadata.token_endpoint_auth_method,
                issuer=self.oauth.issuer,
            )
        if context.client_metadata.redirect_uris is None and context.client_info is not None:
            context.client_metadata.redirect_uris = context.client_info.redirect_uris
        if not self.interactive and context.current_tokens is None:
            raise OAuthConnectNeeded(self.server)

    async def _no_operator(self, authorization_url: str) -> None:
        raise OAuthConnectNeeded(self.server)

    async def _no_operator_callback(self) -> AuthorizationCodeResult:
        raise OAuthConnectNeeded(self.server)


class ClientCredentialsProvider(ClientCredentialsOAuthProvider):
    """Client credentials authenticated with a client secret."""

    async def _initialize(self) -> None:
        await super()._initialize()
        _expiry_from_storage(self.context)


class PrivateKeyJWTProvider(PrivateKeyJWTOAuthProvider):
    """Client credentials authenticated with a JWT signed by the configured key (RFC 7523)."""

    async def _initialize(self) -> None:
        await super()._initialize()
        _expiry_from_storage(self.context)


def _auth_method(oauth: OAuthConfig) -> str:
    if oauth.token_endpoint_auth_method is not None:
        return oauth.token_endpoint_auth_method
    return "client_secret_basic" if oauth.client_secret else "none"


def oauth_auth(
    config: ServerConfig,
    *,
    browser: Browser | None = None,
    redirect_uri: str | None = None,
    storage: TokenStorage | None = None,
    operator: str = "",
) -> httpx2.Auth | None:
    """The `httpx2.Auth` for `config`'s requests; None when it configures no OAuth.

    `browser` is given only where a person (or the conformance suite's headless stand-in) can
    complete an authorization; `redirect_uri` is where the authorization server sends them back.
    """
    oauth = config.oauth
    if oauth is None:
        return None
    storage = storage or DbTokenStorage(config.name, config.url, grant=oauth.grant, operator=operator)
    if oauth.grant == "authorization_code":
        return AuthorizationCodeProvider(config, oauth, storage, browser=browser, redirect_uri=redirect_uri)
    assert oauth.client_id is not None  # checked by oauth_config_parse
    if oauth.private_key is not None:
        signer = SignedJWTParameters(
            issuer=oauth.client_id,
            subject=oauth.client_id,
            signing_key=oauth.private_key,
            signing_algorithm=oauth.signing_algorithm,
        )
        return PrivateKeyJWTProvider(
            config.url,
            storage,
            oauth.client_id,
            signer.create_assertion_provider(),
            scope=oauth.scope,
            issuer=oauth.issuer,
        )
    assert oauth.client_secret is not None  # checked by oauth_config_parse
    method: Literal["client_secret_basic", "client_secret_post"] = (
        "client_secret_post" if oauth.token_endpoint_auth_method == "client_secret_post" else "client_secret_basic"
    )
    return ClientCredentialsProvider(
        config.url,
        storage,
        oauth.client_id,
        oauth.client_secret,
        token_endpoint_auth_method=method,
        scope=oauth.scope,
        issuer=oauth.issuer,
    )


__all__ = [
    "AuthorizationCodeProvider",
    "Browser",
    "OAuthConnectNeeded",
    "oauth_auth",
]
