"""The A2A settings, read in one place: what this Hermes serves to peers and what it allows them.

The variables are documented in docs/configuration.md ("Agent interop"); a peer's own limits are
fields of its entry in the peers file (interop/peers.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings


@dataclass(frozen=True, kw_only=True)
class A2AConfig:
    name: str
    # Where peers reach this Hermes, for the agent cards; "" builds it from each card request's host.
    public_url: str
    peers_path: str
    server_max_turns: int
    server_turn_timeout: float
    # Turns one peer may start here, and messages Hermes may send one peer, per `rate_window` seconds.
    rate_window: float
    rate_limit: int
    send_rate_limit: int
    # Newest exchanges (each way) and tasks kept per peer, so a peer cannot grow the tables without bound.
    peer_keep: int
    # The share of the daily token budget a peer may spend unless its entry says otherwise.
    peer_budget_share: float

    @classmethod
    def from_settings(cls) -> A2AConfig:
        """Read at each use, so tests that change a setting see it."""
        return cls(
            name=settings.HERMES_A2A_NAME,
            public_url=settings.HERMES_A2A_PUBLIC_URL.rstrip("/"),
            peers_path=settings.HERMES_A2A_PEERS,
            server_max_turns=settings.HERMES_A2A_SERVER_MAX_TURNS,
            server_turn_timeout=settings.HERMES_A2A_SERVER_TURN_TIMEOUT,
            rate_window=settings.HERMES_A2A_RATE_WINDOW,
            rate_limit=settings.HERMES_A2A_RATE_LIMIT,
            send_rate_limit=settings.HERMES_A2A_SEND_RATE_LIMIT,
            peer_keep=settings.HERMES_A2A_PEER_KEEP,
            peer_budget_share=settings.HERMES_PEER_BUDGET_SHARE,
        )
