"""Who may cause an action: a turn's provenance decides which tools it is offered.

A turn is started from somewhere (its `origin`): an operator's question (`ui`, `api`, `cli`,
`matrix`), a peer agent's message (`a2a`, `mcp` — `hermes_ask` through `mcp_serve`), Hermes itself
(`signal` for an investigation, `followup`, `schedule`). Only operators' turns may *write*: they keep
`request_execution` and every other tool the hub offers. Everything else is *read-only* — only
tools that declare `readOnlyHint` in their MCP annotations, or that Oikos documents as reads
(`agent.tools.policy.OIKOS_READ_TOOLS`); no `a2a_send`, no other server's write tools. An origin
this table does not know is read-only: a new frontend gains writes by being added here, never by
omission.

A read-only turn may be allowed to *propose* (per peer, `may_propose` in the peers file; for
investigations `HERMES_INVESTIGATIONS_MAY_PROPOSE`): it is then offered the Oikos server's
`request_execution` too, but the call only records a proposal in Hermes (`agent.proposals`), which
reaches Oikos when an operator approves it — as that operator — even for actions Oikos would run on
its own.

Both the listing (what the model sees) and the call (what the hub runs) apply the same rule, so a
model that names a tool it was not offered gets an error value, not a call.
"""

from __future__ import annotations

from typing import Literal

from agent.tools.policy import OIKOS_READ_TOOLS

Capability = Literal["write", "propose", "read"]

# Where operators ask; Matrix included: its bridge only answers allowlisted operators' rooms. `eval`
# is `manage.py eval` asking an eval case's question against a throwaway oikos_sim (evals/runner.py):
# it is offered exactly what an operator is, so a case forbidding a tool measures the model, not a filter.
OPERATOR_ORIGINS = frozenset({"ui", "api", "cli", "matrix", "eval"})
# Turns nobody at Hermes typed: peers (A2A, `hermes_ask`) and Hermes's own (investigations of
# signals, follow-ups of executions, schedules).
READ_ONLY_ORIGINS = frozenset({"a2a", "mcp", "signal", "followup", "schedule"})

# The one tool of the Oikos contract that changes anything.
REQUEST_EXECUTION = "request_execution"


def origin_capability(origin: str, *, may_propose: bool = False) -> Capability:
    """What a turn of `origin` may do: write (operators), propose (read-only turns allowed to), or read."""
    if origin in OPERATOR_ORIGINS:
        return "write"
    return "propose" if may_propose else "read"


def origin_is_operator(origin: str) -> bool:
    return origin in OPERATOR_ORIGINS


def tool_is_read(*, server: str, tool: str, read_only_hint: bool, oikos_server: str) -> bool:
    """Whether a tool only reads: it declares `readOnlyHint`, or it is one of Oikos's documented reads."""
    return read_only_hint or (server == oikos_server and tool in OIKOS_READ_TOOLS)


def tool_is_execution_request(*, server: str, tool: str, oikos_server: str) -> bool:
    """Whether the call asks Oikos to act: its `request_execution`, on the server that is Oikos."""
    return server == oikos_server and tool == REQUEST_EXECUTION


def tool_offered(capability: Capability, *, server: str, tool: str, read_only_hint: bool, oikos_server: str) -> bool:
    """Whether a turn with `capability` is offered (and may call) this tool."""
    if capability == "write":
        return True
    if tool_is_read(server=server, tool=tool, read_only_hint=read_only_hint, oikos_server=oikos_server):
        return True
    return capability == "propose" and tool_is_execution_request(server=server, tool=tool, oikos_server=oikos_server)
