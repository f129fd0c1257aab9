"""Result envelopes: per-server post-processing of what an MCP tool answered.

Some servers wrap their answer in a JSON envelope of their own (GarraIA's `garra.ask.v1`): a
model reading the raw JSON wastes tokens and may miss that `ok: false` means failure. A server
entry opts in with `"hermes": {"envelope": "<name>"}`; the hub then hands every outcome of that
server — results and failures alike — to the envelope, which returns the outcome the model sees.
The ledger keeps the server's raw result either way.

Apps register envelopes from `AppConfig.ready()` with `envelope_register`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agent.conversation.outcomes import ToolOutcome
    from agent.tools.config import ServerConfig


class ResultEnvelope(ABC):
    name: str

    def config_check(self, config: ServerConfig, where: str) -> None:  # noqa: B027 (optional hook)
        """Refuse a server entry this envelope cannot work with (raise `MCPConfigError`)."""

    @abstractmethod
    def outcome(self, outcome: ToolOutcome, *, server: ServerConfig, tool: str) -> ToolOutcome:
        """The outcome the model should see for one call of `tool` on `server`."""


_envelopes: dict[str, ResultEnvelope] = {}


def envelope_register(envelope: ResultEnvelope) -> None:
    _envelopes[envelope.name] = envelope


def envelope_get(name: str) -> ResultEnvelope | None:
    return _envelopes.get(name)


def envelope_names() -> list[str]:
    return sorted(_envelopes)
