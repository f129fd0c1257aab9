"""Recognising an execution that Oikos parked for an operator's approval.

The model gets no approve/deny tool, ever; when its `request_execution` comes back "needs
approval", the engine raises an `approval` event so every transport can put the decision in front
of a human.

Only the Oikos server's `request_execution` counts (`HERMES_OIKOS_SERVER`): any MCP server can name
a tool `request_execution` and answer with an approval id of its choosing, and an approval card
carries Approve/Deny. The server is decided by configuration, never by what a tool is called. Even
then the id is the tool's word only: the control room shows a card as decidable once Oikos's REST
API confirms the approval as pending (see `controlroom.consumers`).
"""

from __future__ import annotations

from typing import Any

from agent.conversation.events import Approval
from agent.tools.config import oikos_server_name

REQUEST_EXECUTION = "request_execution"


def approval_from_result(*, server: str, tool: str, tool_use_id: str, structured: Any) -> Approval | None:
    """The approval a tool result announces: only a parked `request_execution` of the Oikos server."""
    if server != oikos_server_name() or tool != REQUEST_EXECUTION or not isinstance(structured, dict):
        return None
    approval_id = structured.get("approval_id")
    parked = structured.get("needs_approval") is True or structured.get("status") == "proposed"
    if not parked or not approval_id:
        return None
    return Approval(
        tool_use_id=tool_use_id,
        approval_id=str(approval_id),
        execution_id=str(structured.get("execution_id") or ""),
        target=str(structured.get("target") or ""),
        action=str(structured.get("action") or ""),
        risk_class=str(structured.get("risk_class") or ""),
        status=str(structured.get("status") or "proposed"),
        message=str(structured.get("message") or ""),
    )
