"""Which A2A dialect a peer speaks, read from its agent cards (for peers configured as `auto`).

An A2A 1.0 (or 0.3) card at `/.well-known/agent-card.json` wins; otherwise a GarraIA card at
`/.well-known/agent.json`. The answer is kept for the life of the process.
"""

from __future__ import annotations

from typing import Any

import httpx2

from interop.client.garraia import garraia_http_client
from interop.client.guard import PeerPolicy
from interop.client.reply import PeerCallError
from interop.peers import Peer

_detected: dict[tuple[str, str], str] = {}


async def dialect_detect(peer: Peer, policy: PeerPolicy) -> str:
    key = (peer.name, peer.url)
    if key in _detected:
        return _detected[key]
    async with garraia_http_client(peer, policy) as client:
        card = await _card(client, peer.endpoint("/.well-known/agent-card.json"))
        if card is not None and ("supportedInterfaces" in card or "protocolVersion" in card):
            dialect = "a2a"
        else:
            card = await _card(client, peer.endpoint("/.well-known/agent.json"))
            if card is None or not isinstance(card.get("name"), str):
                raise PeerCallError(
                    "protocol",
                    f"cannot tell which A2A dialect {peer.name} speaks: neither /.well-known/agent-card.json nor "
                    '/.well-known/agent.json answered with an agent card; set "dialect" in the peers file',
                )
            dialect = "a2a" if "supportedInterfaces" in card else "garraia"
    _detected[key] = dialect
    return dialect


async def _card(client: httpx2.AsyncClient, url: str) -> dict[str, Any] | None:
    try:
        response = await client.get(url)
    except httpx2.TimeoutException:
        raise PeerCallError("timeout", f"no answer from {url}") from None
    except httpx2.TransportError as exc:
        raise PeerCallError("connect", f"cannot reach {url}: {exc}") from None
    if response.status_code != 200:
        return None
    try:
        card = response.json()
    except ValueError:
        return None
    return card if isinstance(card, dict) else None
