"""GarraIA's `garra.ask.v1` envelope → a clean tool result for the model.

`garra mcp-server`'s `garra_ask` answers one text block of JSON: `{"schema":"garra.ask.v1","ok":true,
"answer","provider","model","latency_ms"}`, or `ok: false` with `{"error":{"kind","message"}}` and
`isError`; arguments it rejects are a JSON-RPC `invalid_params` error. The model gets the answer
alone, fenced as untrusted, or a one-line error saying what failed.

Server entries using it must pin `provider` and `model` (`"hermes": {"arguments": {...}}`): GarraIA's
default model changes between releases. `GARRAIA_MCP_ENABLE_TOOLS` is refused outright: it makes the
server expose a bash-capable tool.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from mcp.types import INVALID_PARAMS

from agent.conversation.outcomes import ToolOutcome
from agent.tools.config import MCPConfigError, ServerConfig
from agent.tools.envelopes import ResultEnvelope
from interop.untrusted import untrusted_wrap

SCHEMA = "garra.ask.v1"
FORBIDDEN_ENV = "GARRAIA_MCP_ENABLE_TOOLS"


class GarraAskEnvelope(ResultEnvelope):
    name = SCHEMA

    def config_check(self, config: ServerConfig, where: str) -> None:
        if FORBIDDEN_ENV in config.env:
            raise MCPConfigError(
                f"{where}: remove {FORBIDDEN_ENV} from env: it makes garra expose garra_agent, a bash-capable "
                "tool, to whoever calls the server"
            )
        missing = [key for key in ("provider", "model") if not isinstance(config.fixed_arguments.get(key), str)]
        if missing:
            raise MCPConfigError(
                f'{where}: set "hermes.arguments.{missing[0]}": garra\'s default model changes between releases, '
                "so Hermes always passes provider and model"
            )

    def outcome(self, outcome: ToolOutcome, *, server: ServerConfig, tool: str) -> ToolOutcome:
        envelope = outcome.structured if isinstance(outcome.structured, dict) else None
        if envelope is not None and envelope.get("schema") == SCHEMA:
            return _from_envelope(outcome, envelope, peer=server.peer_name)
        if outcome.is_error:
            return _failure(outcome, tool=tool)
        # Not an envelope (another tool, another release): still the peer's words.
        text = "".join(block.get("text", "") for block in outcome.content if block.get("type") == "text")
        return _with_text(outcome, untrusted_wrap(text, source=server.peer_name), is_error=False)


def _from_envelope(outcome: ToolOutcome, envelope: dict[str, Any], *, peer: str) -> ToolOutcome:
    if envelope.get("ok") is True and isinstance(envelope.get("answer"), str):
        answered_by = f"{envelope.get('provider', '?')}/{envelope.get('model', '?')}"
        text = untrusted_wrap(envelope["answer"], source=peer)
        text += f"\n(answered by {answered_by} in {envelope.get('latency_ms', '?')} ms)"
        return _with_text(outcome, text, is_error=False)
    error = envelope.get("error")
    if not isinstance(error, dict):
        error = {}
    kind = str(error.get("kind") or "unknown")
    message = str(error.get("message") or "no message")
    return _with_text(outcome, f"GarraIA could not answer ({kind}): {message}", is_error=True)


def _failure(outcome: ToolOutcome, *, tool: str) -> ToolOutcome:
    error = outcome.record.get("error")
    if isinstance(error, dict) and error.get("code") == INVALID_PARAMS:
        detail = str(error.get("message", "")).split("with an error: ", 1)[-1]
        text = (
            f"{tool} refused the arguments (invalid_params): {detail}. It takes message (at most 64 KiB), and "
            "optionally timeout_secs (1 to 600) and system_prompt (at most 8 KiB); nothing else."
        )
        return _with_text(outcome, text, is_error=True)
    return outcome


def _with_text(outcome: ToolOutcome, text: str, *, is_error: bool) -> ToolOutcome:
    return dataclasses.replace(outcome, content=[{"type": "text", "text": text}], is_error=is_error)
