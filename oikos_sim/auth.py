"""Bearer tokens and the actors they stand for; the middleware that guards ``/mcp`` and ``/api``.

Token values are compared in constant time and never logged, printed or echoed back.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Mapping

from starlette.types import ASGIApp, Receive, Scope, Send

# Development defaults, documented in docs/oikos-sim.md; override with OIKOS_SIM_TOKENS.
DEFAULT_TOKENS: dict[str, str] = {
    "agent:hermes": "hermes-agent-dev-token",
    "service:hermes-controlroom": "hermes-operator-dev-token",
}
ACTOR_SCOPE_KEY = "oikos.actor"
PUBLIC_PATHS = frozenset({"/healthz"})


class TokenConfigError(ValueError):
    pass


def tokens_parse(spec: str) -> dict[str, str]:
    """Parse ``"actor=token,actor=token"`` into {actor: token}; errors never quote a token."""
    tokens: dict[str, str] = {}
    for index, item in enumerate(part.strip() for part in spec.split(",")):
        if not item:
            continue
        actor, separator, token = item.partition("=")
        actor, token = actor.strip(), token.strip()
        if not separator or not actor or not token:
            raise TokenConfigError(f"OIKOS_SIM_TOKENS entry {index + 1} must look like actor=token.")
        if ":" not in actor:
            raise TokenConfigError(
                f"OIKOS_SIM_TOKENS entry {index + 1}: actor {actor!r} must be kind:name, e.g. agent:hermes."
            )
        tokens[actor] = token
    if not tokens:
        raise TokenConfigError("OIKOS_SIM_TOKENS is set but names no actor=token pairs.")
    return tokens


def tokens_from_env(environ: Mapping[str, str]) -> dict[str, str]:
    spec = environ.get("OIKOS_SIM_TOKENS")
    return dict(DEFAULT_TOKENS) if spec is None else tokens_parse(spec)


class TokenTable:
    def __init__(self, tokens: Mapping[str, str]) -> None:
        self._pairs = [(actor, token.encode()) for actor, token in tokens.items()]

    def actor_for(self, token: str) -> str | None:
        presented = token.encode()
        found = None
        for actor, known in self._pairs:
            # Compare against every token so timing does not reveal which one matched.
            if hmac.compare_digest(presented, known):
                found = actor
        return found

    @property
    def actors(self) -> list[str]:
        return [actor for actor, _ in self._pairs]


def _bearer(scope: Scope) -> str | None:
    for name, value in scope.get("headers", []):
        if name == b"authorization":
            scheme, _, credentials = value.decode("latin-1").partition(" ")
            if scheme.lower() == "bearer" and credentials.strip():
                return credentials.strip()
    return None


class BearerAuthMiddleware:
    """Rejects every unauthenticated HTTP request (bar ``/healthz``) with a 401 JSON error, and
    puts the caller's actor in ``scope["oikos.actor"]`` for the tools and views."""

    def __init__(self, app: ASGIApp, tokens: TokenTable) -> None:
        self.app = app
        self.tokens = tokens

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in PUBLIC_PATHS:
            await self.app(scope, receive, send)
            return
        token = _bearer(scope)
        actor = self.tokens.actor_for(token) if token else None
        if actor is None:
            message = "missing bearer token" if token is None else "invalid bearer token"
            await _unauthorized(send, message)
            return
        scope[ACTOR_SCOPE_KEY] = actor
        await self.app(scope, receive, send)


async def _unauthorized(send: Send, message: str) -> None:
    body = json.dumps({"error": "unauthorized", "message": message}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 401,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"www-authenticate", b'Bearer realm="oikos"'),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
