"""What Hermes says about itself to peers: the A2A 1.0 agent card and GarraIA's agent card.

Both are public (no token): they tell a peer where to talk and how to authenticate. The base URL is
`HERMES_A2A_PUBLIC_URL` when set (behind a proxy), else built from the request: its `Host` — which
the edge has checked against `HERMES_ALLOWED_HOSTS`, and which is checked again here, so a card
never advertises a host a client made up — the scheme the client used (`https` believed from the
trusted proxy only), and `HERMES_URL_PREFIX`.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    HTTPAuthSecurityScheme,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)
from a2a.utils.constants import TransportProtocol
from django.conf import settings
from starlette.requests import Request
from starlette.responses import Response

from access.hosts import host_allowed, scope_host, scope_scheme
from agent.version import hermes_version
from interop.config import A2AConfig

JSONRPC_PATH = "/a2a/jsonrpc"
REST_PREFIX = "/a2a/rest"
SECURITY_SCHEME = "bearer"

DESCRIPTION = (
    "Hermes, the resident operator agent of the Oikos homelab control plane: it answers questions about the "
    "fleet's health, dependencies, logs and changes from Oikos's tools, and requests changes only through "
    "Oikos's approval-gated executions."
)
SKILL_ID = "homelab-operator"
SKILL_NAME = "Homelab operator"
SKILL_DESCRIPTION = "Investigate the homelab (health, blast radius, logs, metrics, history) and explain it."
SKILL_TAGS = ["oikos", "homelab", "operations"]
# Peers may keep a card this long, then revalidate it with its ETag (a 304 costs no body).
CARD_MAX_AGE_SECONDS = 300


def card_base_url(request: Request) -> str | None:
    """Where peers reach this Hermes; None when the request's host is not one Hermes answers to."""
    public_url = A2AConfig.from_settings().public_url
    if public_url:
        return public_url
    host = scope_host(request.scope)
    if not host_allowed(host):
        return None
    return f"{scope_scheme(request.scope)}://{host}{settings.HERMES_URL_PREFIX}"


def a2a_card(base_url: str) -> AgentCard:
    """The A2A 1.0 card: JSON-RPC and HTTP+JSON, each also in its 0.3 form, behind a bearer token."""
    interfaces = [
        AgentInterface(url=base_url + path, protocol_binding=binding, protocol_version=version)
        for version in ("1.0", "0.3")
        for binding, path in ((TransportProtocol.JSONRPC, JSONRPC_PATH), (TransportProtocol.HTTP_JSON, REST_PREFIX))
    ]
    bearer = HTTPAuthSecurityScheme(
        scheme="bearer", description="A pairing token issued by this Hermes (manage.py a2a_pair <peer>)."
    )
    return AgentCard(
        name=A2AConfig.from_settings().name,
        description=DESCRIPTION,
        version=hermes_version(),
        supported_interfaces=interfaces,
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        security_schemes={SECURITY_SCHEME: SecurityScheme(http_auth_security_scheme=bearer)},
        security_requirements=[SecurityRequirement(schemes={SECURITY_SCHEME: StringList()})],
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[
            AgentSkill(
                id=SKILL_ID,
                name=SKILL_NAME,
                description=SKILL_DESCRIPTION,
                tags=SKILL_TAGS,
                examples=["What's degraded and what depends on it?"],
            )
        ],
    )


def garraia_card(base_url: str) -> dict[str, Any]:
    return {
        "name": A2AConfig.from_settings().name,
        "url": base_url,
        "version": hermes_version(),
        "description": DESCRIPTION,
        "capabilities": {"streaming": False, "pushNotifications": False},
        "skills": [{"id": SKILL_ID, "name": SKILL_NAME, "description": SKILL_DESCRIPTION, "tags": SKILL_TAGS}],
    }


def card_response(request: Request, card: dict[str, Any]) -> Response:
    """A card as JSON with caching headers: `ETag` (a digest of the exact body), `Cache-Control`, and
    304 without a body when the peer's `If-None-Match` names the card it already has."""
    body = json.dumps(card, ensure_ascii=False, separators=(",", ":"), sort_keys=True).encode()
    etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
    headers = {"ETag": etag, "Cache-Control": f"public, max-age={CARD_MAX_AGE_SECONDS}"}
    if _etag_matches(request.headers.get("if-none-match", ""), etag):
        return Response(status_code=304, headers=headers)
    return Response(body, media_type="application/json", headers=headers)


def _etag_matches(header: str, etag: str) -> bool:
    # A weak comparison, as RFC 9110 asks of If-None-Match: `W/` is ignored.
    tags = {tag.strip().removeprefix("W/") for tag in header.split(",")}
    return "*" in tags or etag in tags
