"""The peers file: which agents Hermes may talk to over A2A, and how.

    {"peers": {
        "garraia": {"url": "http://127.0.0.1:3888", "dialect": "garraia"},
        "lab": {"url": "https://hermes.lab.example:8443", "dialect": "auto",
                "token": "${LAB_A2A_TOKEN}", "max_turns": 6, "timeout": 90, "max_chars": 6000}
    }}

`url` is the peer's base URL; its `scheme://host:port` is the only origin Hermes will ever connect
to for that peer (the allowlist is exactly the set of these origins). `dialect` is `a2a` (A2A 1.0),
`garraia` (GarraIA's REST dialect) or `auto` (read from the peer's agent cards on first use).
`token` is the bearer the peer issued to Hermes (optional: stock GarraIA checks none). `${VAR}` and
`${VAR:-default}` expand as in the `mcpServers` file. `max_turns` (8), `timeout` (seconds per turn,
120), `max_chars` (per message, both ways, 8000) and `stop_marker` (the agreed text that ends a
conversation, `<<END>>`) take these defaults when left out. `may_propose` (default
false): a turn started by this peer's message may propose an execution, which waits in Hermes for an
operator's approval; without it the peer's turns only read (`agent.tools.provenance`).

What a peer may make Hermes spend when it asks (over A2A or `mcp_serve`, under the same name):
`budget_share`, the share of the daily token budget its turns may spend per day
(`HERMES_PEER_BUDGET_SHARE` by default), and `rate_limit`, how many questions it may ask per
`HERMES_A2A_RATE_WINDOW` seconds (`HERMES_A2A_RATE_LIMIT` by default). A caller with no entry gets
the defaults.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from agent.budget import PeerAllowance
from agent.tools.config import MCPConfigError, config_file_read, config_value_expand
from interop.config import A2AConfig

Dialect = Literal["a2a", "garraia", "auto"]
DIALECTS: tuple[Dialect, ...] = ("a2a", "garraia", "auto")

PEER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_FIELDS = {
    "url",
    "dialect",
    "token",
    "max_turns",
    "timeout",
    "max_chars",
    "stop_marker",
    "budget_share",
    "rate_limit",
    "may_propose",
}
STOP_MARKER = "<<END>>"
_DEFAULT_PORTS = {"http": 80, "https": 443}

logger = logging.getLogger(__name__)


class PeersConfigError(MCPConfigError):
    """The peers file cannot be used; the message says where and why."""


@dataclass(frozen=True)
class Peer:
    name: str
    url: str  # base URL without a trailing slash
    origin: str  # scheme://host:port, the one origin Hermes connects to for this peer
    dialect: Dialect
    token: str = field(default="", repr=False)
    max_turns: int = 8
    timeout: float = 120.0
    max_chars: int = 8000
    stop_marker: str = STOP_MARKER
    # Of the daily token budget, per day; None: `HERMES_PEER_BUDGET_SHARE`.
    budget_share: float | None = None
    # Questions per `HERMES_A2A_RATE_WINDOW`; None: `HERMES_A2A_RATE_LIMIT`.
    rate_limit: int | None = None
    may_propose: bool = False

    def endpoint(self, path: str) -> str:
        return self.url + path


def url_origin(url: str) -> str:
    """`scheme://host:port` of an http(s) URL, ports made explicit; `ValueError` when it is not one."""
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS:
        raise ValueError(f"{url!r} is not an http:// or https:// URL")
    if "@" in parts.netloc:
        raise ValueError(f"{url!r} carries credentials in the URL; put the token in the peers file")
    try:
        port = parts.port or _DEFAULT_PORTS[scheme]
    except ValueError:
        raise ValueError(f"{url!r} has an invalid port") from None
    host = (parts.hostname or "").lower()
    if not host:
        raise ValueError(f"{url!r} has no host")
    if ":" in host:
        host = f"[{host}]"
    return f"{scheme}://{host}:{port}"


@dataclass(frozen=True)
class PeerBook:
    """The configured peers, and the lookup `a2a_send` and `a2a_talk` use to pick one."""

    peers: tuple[Peer, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.peers)

    @property
    def allowlist(self) -> list[str]:
        return sorted({peer.origin for peer in self.peers})

    def named(self, name: str) -> Peer | None:
        return next((peer for peer in self.peers if peer.name == name), None)

    def find(self, target: str) -> Peer | None:
        """The peer `target` names: a peer name, or a URL on a peer's exact origin.

        Only the origin decides; several peers on one origin are told apart by the longest base
        path the URL lies under.
        """
        named = self.named(target.strip())
        if named is not None:
            return named
        try:
            origin = url_origin(target)
        except ValueError:
            return None
        candidates = [peer for peer in self.peers if peer.origin == origin]
        if len(candidates) <= 1:
            return candidates[0] if candidates else None
        path = urlsplit(target.strip()).path.rstrip("/")
        under = [peer for peer in candidates if path == _path(peer) or path.startswith(_path(peer) + "/")]
        return max(under, key=lambda peer: len(_path(peer)), default=None)

    def secret_values(self) -> frozenset[str]:
        return frozenset(peer.token for peer in self.peers if len(peer.token) >= 8)


def _path(peer: Peer) -> str:
    return urlsplit(peer.url).path.rstrip("/")


def peer_allowance(name: str, *, rate_counted_here: bool) -> PeerAllowance:
    """What the peer `name` may spend and how often it may ask (agent/budget.py), from its entry in
    the peers file or the defaults. `rate_counted_here`: admission counts its questions (`mcp_serve`),
    rather than the A2A server's exchanges."""
    entry = _entry(name)
    share = entry.budget_share if entry is not None else None
    config = A2AConfig.from_settings()
    return PeerAllowance(
        name=name,
        share=config.peer_budget_share if share is None else share,
        rate_limit=peer_rate_limit(name) if rate_counted_here else None,
        window=config.rate_window,
    )


def peer_rate_limit(name: str) -> int:
    """Questions the peer `name` may ask per `HERMES_A2A_RATE_WINDOW`."""
    entry = _entry(name)
    rate = entry.rate_limit if entry is not None else None
    return A2AConfig.from_settings().rate_limit if rate is None else rate


def _entry(name: str) -> Peer | None:
    # A peers file that cannot be read holds a peer to the defaults, which are limits too; the
    # file's error is told where it is used (the a2a_send tool, manage.py doctor).
    try:
        return peers_from_settings().named(name)
    except PeersConfigError as exc:
        logger.warning("The peers file cannot be read; %s gets the default budget share and rate: %s", name, exc)
        return None


def peers_from_settings() -> PeerBook:
    """The peers of `HERMES_A2A_PEERS` (none when unset). Raises `PeersConfigError`."""
    path = A2AConfig.from_settings().peers_path
    if not path:
        return PeerBook()
    return peers_load(Path(path))


def peer_may_propose(name: str) -> bool:
    """Whether the peers file lets `name`'s turns propose executions (off for a peer it does not list,
    and when the file cannot be read: a broken file grants nothing)."""
    try:
        peer = peers_from_settings().named(name)
    except PeersConfigError:
        return False
    return peer is not None and peer.may_propose


def peers_load(path: Path, *, environ: Mapping[str, str] | None = None) -> PeerBook:
    document = config_file_read(path, kind="peers file", setting="HERMES_A2A_PEERS", error=PeersConfigError)
    return peers_parse(document, source=str(path), environ=os.environ if environ is None else environ)


def peers_parse(document: Any, *, source: str, environ: Mapping[str, str]) -> PeerBook:
    if not isinstance(document, dict) or not isinstance(document.get("peers"), dict):
        raise PeersConfigError(f'{source}: expected a JSON object with an object under "peers"')
    peers = []
    for name, entry in document["peers"].items():
        where = f"{source}: peer {name!r}"
        if not isinstance(name, str) or not PEER_NAME.match(name):
            raise PeersConfigError(f"{where}: a peer name is 1-64 letters, digits, '.', '_' or '-'")
        if not isinstance(entry, dict):
            raise PeersConfigError(f"{where}: expected an object, got {type(entry).__name__}")
        peers.append(_peer_parse(name, entry, where, environ))
    return PeerBook(tuple(peers))


def _peer_parse(name: str, entry: dict[str, Any], where: str, environ: Mapping[str, str]) -> Peer:
    unknown = sorted(set(entry) - _FIELDS)
    if unknown:
        raise PeersConfigError(f'{where}: unknown field "{unknown[0]}" (known: {", ".join(sorted(_FIELDS))})')
    try:
        entry = {key: config_value_expand(value, key, where, environ, set()) for key, value in entry.items()}
    except MCPConfigError as exc:
        raise PeersConfigError(str(exc)) from None
    url = entry.get("url")
    if not isinstance(url, str) or not url.strip():
        raise PeersConfigError(f'{where}: "url" is required')
    try:
        origin = url_origin(url)
    except ValueError as exc:
        raise PeersConfigError(f"{where}: {exc}") from None
    parts = urlsplit(url.strip())
    if parts.query or parts.fragment:
        raise PeersConfigError(f'{where}: "url" is a base URL; drop its query and fragment')
    dialect = entry.get("dialect", "auto")
    if dialect not in DIALECTS:
        raise PeersConfigError(f'{where}: "dialect" is one of {", ".join(DIALECTS)}, not {dialect!r}')
    may_propose = entry.get("may_propose", False)
    if not isinstance(may_propose, bool):
        raise PeersConfigError(f'{where}: "may_propose" must be true or false')
    token = entry.get("token", "")
    if not isinstance(token, str):
        raise PeersConfigError(f'{where}: "token" must be a string')
    stop_marker = entry.get("stop_marker", STOP_MARKER)
    if not isinstance(stop_marker, str) or not stop_marker.strip():
        raise PeersConfigError(f'{where}: "stop_marker" must be a non-empty string')
    return Peer(
        name=name,
        url=origin + parts.path.rstrip("/"),
        origin=origin,
        dialect=dialect,
        token=token.strip(),
        max_turns=_number(entry, "max_turns", int, Peer.max_turns, where),
        timeout=float(_number(entry, "timeout", (int, float), Peer.timeout, where)),
        max_chars=_number(entry, "max_chars", int, Peer.max_chars, where),
        stop_marker=stop_marker.strip(),
        budget_share=_share(entry, where),
        rate_limit=_number(entry, "rate_limit", int, None, where) if "rate_limit" in entry else None,
        may_propose=may_propose,
    )


def _share(entry: dict[str, Any], where: str) -> float | None:
    if "budget_share" not in entry:
        return None
    value = entry["budget_share"]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise PeersConfigError(f'{where}: "budget_share" is a share of the daily budget, between 0 and 1')
    return float(value)


def _number(entry: dict[str, Any], key: str, kind: Any, default: Any, where: str) -> Any:
    value = entry.get(key, default)
    if isinstance(value, bool) or not isinstance(value, kind) or value <= 0:
        raise PeersConfigError(f'{where}: "{key}" must be a positive number')
    return value
