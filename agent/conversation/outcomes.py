"""What one tool call produced (`ToolOutcome`), and how to say that a call's outcome is unknown.

A call cut off while it was in flight — by Stop, by the turn's time limit, by an MCP timeout or a
lost connection, by a crash of Hermes — may well have run on the server: Oikos finishes a restart
whether or not Hermes is still listening. Telling the model "not run" invites it to request the
same restart or deploy again, so every such call is answered with the same honest wording:
*outcome unknown, it may have run, check before retrying*; for `request_execution`, with the Oikos
tools to look the execution up.

A module of its own so that the hub, the envelopes and the engine share these types without
importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from agent.conversation.results import tool_error_blocks, tool_error_record

OutcomeState = Literal["ok", "error", "unknown"]

# The one tool through which anything changes (docs/architecture.md, "The Oikos contract"): a repeat
# can restart or deploy twice.
REQUEST_EXECUTION = "request_execution"


@dataclass(frozen=True)
class Cutoff:
    """Why a call in flight got no answer: `kind` for the ledger's record, `words` for the model."""

    kind: str
    words: str


def cutoff_cancelled(reason: str) -> Cutoff:
    """A cancel's cut-off, in the words of its reason ("Cancelled by the peer.")."""
    said = reason.rstrip(".")
    return Cutoff("cancelled", f"{said[:1].lower()}{said[1:]} while the call was in flight")


# What a cancelled turn records when whoever stopped it gave no reason of its own.
OPERATOR_CANCEL_REASON = "Cancelled by the operator."
CUTOFF_INTERRUPTED = Cutoff("interrupted", "Hermes stopped (a restart or a crash) while the call was in flight")
CUTOFF_CANCELLED = cutoff_cancelled(OPERATOR_CANCEL_REASON)
CUTOFF_TIME_LIMIT = Cutoff("time_limit", "the turn's time limit was reached while the call was in flight")


@dataclass(frozen=True)
class ToolOutcome:
    """What one tool call produced, for the model (`content`) and for the ledger (`record`)."""

    content: list[dict[str, Any]]  # Anthropic blocks for the tool_result (text/image), NOT truncated
    is_error: bool
    record: dict[str, Any]  # JSON-able result for the ledger, one copy, capped (results.tool_result_record)
    structured: Any | None  # structured_content, or the text parsed when it is a JSON object
    duration_ms: int
    # The call may have run although no answer came back (timeout, lost connection): see above.
    may_have_run: bool = False

    @classmethod
    def unknown(cls, *, tool: str, cause: Cutoff, duration_ms: int) -> ToolOutcome:
        """A call cut off in flight by `cause`: an error whose outcome is unknown (it may have run)."""
        text = outcome_unknown_text(tool=tool, cause=cause)
        return cls(
            content=tool_error_blocks(text),
            is_error=True,
            record=tool_error_record(cause.kind, text),
            structured=None,
            duration_ms=duration_ms,
            may_have_run=True,
        )

    @property
    def state(self) -> OutcomeState:
        """The ledger's word for it: `ok`, `error`, or `unknown` (an error that may have run)."""
        if self.may_have_run:
            return "unknown"
        return "error" if self.is_error else "ok"


def outcome_unknown_advice(tool: str) -> str:
    """What to do about a call that may have run: check first; for `request_execution`, how."""
    if tool_real_name(tool) == REQUEST_EXECUTION:
        return (
            "It may have run: look the execution up with Oikos's tools (get_execution, get_agent_activity, "
            "list_approvals) before requesting it again."
        )
    return "It may have run; check before retrying."


def outcome_unknown_text(*, tool: str, cause: Cutoff) -> str:
    """The tool_result text for a call cut off in flight by `cause` (one of the `CUTOFF_*`)."""
    return f"Outcome unknown: {cause.words}. {outcome_unknown_advice(tool)}"


def tool_real_name(name: str) -> str:
    """`request_execution` from `mcp__oikos__request_execution` (or from itself)."""
    return name.rsplit("__", 1)[-1]
