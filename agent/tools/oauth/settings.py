"""The `"oauth"` object under a server's `"hermes"` options in the `mcpServers` file.

    "hermes": {"oauth": {}}                                     # authorization code with PKCE,
                                                                # dynamic client registration
    "hermes": {"oauth": {"client_id": "hermes", "client_secret": "${NOTES_OAUTH_SECRET}"}}
                                                                # ... with a pre-registered client
    "hermes": {"oauth": {"grant": "client_credentials", "client_id": "svc-hermes",
                         "client_secret": "${SVC_SECRET}", "issuer": "https://auth.example.net"}}
    "hermes": {"oauth": {"grant": "client_credentials", "client_id": "svc-hermes",
                         "private_key": "${SVC_KEY_PEM}", "signing_algorithm": "ES256"}}

An authorization-code server is connected once by an operator from the control room (`/ui/servers/`);
a client-credentials one (a service account) gets its tokens by itself. Without `client_id` the
client registers itself (RFC 7591), or uses `client_metadata_url` as its id where the authorization
server supports client ID metadata documents.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Grant = Literal["authorization_code", "client_credentials"]

_GRANTS: tuple[Grant, ...] = ("authorization_code", "client_credentials")
_AUTH_METHODS = ("client_secret_basic", "client_secret_post", "none")
OAUTH_KEYS = (
    "grant",
    "client_id",
    "client_secret",
    "private_key",
    "signing_algorithm",
    "token_endpoint_auth_method",
    "scope",
    "issuer",
    "client_metadata_url",
    "client_name",
)


class OAuthConfigError(ValueError):
    """The `"oauth"` object cannot be used; the message says which key and why."""


@dataclass(frozen=True)
class OAuthConfig:
    """How Hermes authorizes itself to one MCP server. Secrets stay out of `repr`."""

    grant: Grant = "authorization_code"
    client_id: str | None = None
    client_secret: str | None = field(default=None, repr=False)
    # A PEM private key: client credentials authenticated with a signed JWT (RFC 7523) instead of a secret.
    private_key: str | None = field(default=None, repr=False)
    signing_algorithm: str = "RS256"
    token_endpoint_auth_method: str | None = None
    scope: str | None = None
    issuer: str | None = None
    client_metadata_url: str | None = None
    client_name: str = "Hermes"

    @property
    def interactive(self) -> bool:
        """Whether a person must authorize it once (the Servers page's "Connect")."""
        return self.grant == "authorization_code"

    def secret_values(self) -> frozenset[str]:
        """What must never be shown or stored raw: the client secret and the private key."""
        return frozenset(value for value in (self.client_secret, self.private_key) if value)


def oauth_config_parse(options: Any, where: str) -> OAuthConfig:
    """An `OAuthConfig` from the `"oauth"` value of a server's `"hermes"` options."""
    if not isinstance(options, dict):
        raise OAuthConfigError(f'{where}: "hermes.oauth" must be an object')
    unknown = sorted(set(options) - set(OAUTH_KEYS))
    if unknown:
        raise OAuthConfigError(f'{where}: unknown key "hermes.oauth.{unknown[0]}" (known: {", ".join(OAUTH_KEYS)})')
    for key, value in options.items():
        if not isinstance(value, str) or not value:
            raise OAuthConfigError(f'{where}: "hermes.oauth.{key}" must be a non-empty string')
    grant = options.get("grant", "authorization_code")
    if grant not in _GRANTS:
        raise OAuthConfigError(f'{where}: "hermes.oauth.grant" must be one of {", ".join(_GRANTS)}, got {grant!r}')
    method = options.get("token_endpoint_auth_method")
    if method is not None and method not in _AUTH_METHODS:
        raise OAuthConfigError(
            f'{where}: "hermes.oauth.token_endpoint_auth_method" must be one of {", ".join(_AUTH_METHODS)}'
        )
    if grant == "client_credentials":
        if "client_id" not in options:
            raise OAuthConfigError(f'{where}: "hermes.oauth.client_id" is required for client credentials')
        if ("client_secret" in options) == ("private_key" in options):
            raise OAuthConfigError(
                f'{where}: client credentials need exactly one of "hermes.oauth.client_secret" and "private_key"'
            )
        if method == "none":
            raise OAuthConfigError(f'{where}: client credentials cannot use token_endpoint_auth_method "none"')
    elif "private_key" in options:
        raise OAuthConfigError(f'{where}: "hermes.oauth.private_key" is only for client credentials')
    if "client_secret" in options and "client_id" not in options:
        raise OAuthConfigError(f'{where}: "hermes.oauth.client_secret" needs "client_id"')
    metadata_url = options.get("client_metadata_url")
    if metadata_url is not None and not metadata_url.startswith("https://"):
        raise OAuthConfigError(f'{where}: "hermes.oauth.client_metadata_url" must be an https:// URL')
    return OAuthConfig(
        grant=grant,
        client_id=options.get("client_id"),
        client_secret=options.get("client_secret"),
        private_key=options.get("private_key"),
        signing_algorithm=options.get("signing_algorithm", "RS256"),
        token_endpoint_auth_method=method,
        scope=options.get("scope"),
        issuer=options.get("issuer"),
        client_metadata_url=metadata_url,
        client_name=options.get("client_name", "Hermes"),
    )
