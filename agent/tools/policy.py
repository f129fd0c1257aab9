"""Which MCP tools Hermes offers at all: no tool that decides an approval ever reaches the model.

Oikos refuses decisions made with the agent's own token, and that is the real guarantee. This is the
second lock, on Hermes's side, an explicit policy per server:

- **The Oikos server** (the one named by `HERMES_OIKOS_SERVER`) is held to an *allowlist*: the 28
  tools of the Oikos contract (DESIGN §7), which we know to be reads plus `request_execution`. A tool
  outside that surface is offered only if it does not look like a decision tool and does not touch
  approvals, decisions or executions at all — unless the server's `tools.allow` names it, and even
  then never when it looks like a decision tool. A newer Oikos's new read tools keep working; a new
  approval endpoint does not reach the model by accident.
- **Every other server** gets a *denylist*: the built-in decision patterns below, plus the globs of
  its `tools.deny` and of `HERMES_MCP_TOOLS_DENY`. The built-in patterns cannot be switched off.

The built-in patterns read a tool's name as words, however it is spelled (`grant_approval`,
`grantApproval`, `Grant-Approval`, `approval.grant`):

- a decision verb in any form, anywhere — approve, deny, reject, decide, authorize/authorise,
  override, veto (`approves_execution`, `denied`, `undecided`, `reauthorize`);
- a decision noun (`decision`, `verdict`), unless the name starts with a read verb
  (`get_decision_log` is a read; `submitDecision` is not);
- a verb that settles something — grant, resolve, confirm, accept, allow, permit, submit, sign,
  acknowledge, consent, answer, respond, release, unblock, settle, finalize, greenlight, vote, mark —
  together with an approval word — approval, execution, request, permission
  (`resolve_approval`, `confirmExecution`, `accept_request`).

A withheld tool is left out of every listing — so neither the model, nor `/query`, nor a peer talking
to Hermes can reach it through the tool hub — and the reason is logged once per process.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass
from fnmatch import fnmatchcase

logger = logging.getLogger(__name__)

# The Oikos contract's MCP surface (DESIGN §7); `tests/agent/test_tool_policy.py` keeps it equal to
# oikos_sim's. All are read-only but `request_execution`, which Oikos classifies and may park.
OIKOS_TOOLS = frozenset(
    {
        "get_entity",
        "list_entities",
        "get_relations",
        "get_blast_radius",
        "search_knowledge",
        "get_health_summary",
        "whoami",
        "explain",
        "preflight",
        "get_change_history",
        "get_state_snapshot",
        "list_my_secrets",
        "tail_log",
        "get_service_status",
        "list_lxcs",
        "get_lxc_state",
        "ping_service",
        "request_execution",
        "get_agent_activity",
        "get_signal_history",
        "get_patterns",
        "get_skills",
        "get_audit_trail",
        "get_trend",
        "get_event_timeline",
        "query_metrics",
        "get_execution",
        "list_approvals",
    }
)
# The reads among them: what Oikos documents as changing nothing, which a read-only turn may call
# whatever its annotations say (`agent.tools.provenance`).
OIKOS_READ_TOOLS = OIKOS_TOOLS - {"request_execution"}

# Words of a tool name, whether written snake_case, kebab-case, dotted or camelCase.
_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")

# Searched in the whole lowercased name, so a name run together (`approveexecution`) is caught too.
# `approv` not followed by `al`: the noun (`list_approvals`) names what is decided, not a decision;
# `deny` not followed by `list`: a denylist is a list.
_DECISION_VERB = re.compile(r"approv(?!al)|den(?:y|ie)(?!list)|reject|decid|authori[sz](?:e|ing)|overrid|veto")
_DECISION_NOUNS = frozenset({"decision", "decisions", "verdict", "verdicts"})
_READ_VERBS = frozenset(
    {"get", "list", "read", "show", "search", "describe", "query", "count", "view", "fetch", "find", "explain"}
)
_SETTLING_VERBS = (
    "grant",
    "resolve",
    "confirm",
    "accept",
    "allow",
    "permit",
    "submit",
    "sign",
    "ack",
    "acknowledge",
    "consent",
    "answer",
    "respond",
    "release",
    "unblock",
    "settle",
    "finalize",
    "finalise",
    "greenlight",
    "vote",
    "mark",
)
_APPROVAL_WORD = re.compile(r"approval|execution|request|permission")
# Words that mark a tool of the Oikos server as touching approvals when it is not a known one.
_OIKOS_SENSITIVE = re.compile(r"approv|decision|decid|verdict|execution|execute|grant|authori[sz]")


def tool_name_words(name: str) -> list[str]:
    """`submitDecision` → ["submit", "decision"]; `approval.grant` → ["approval", "grant"]."""
    return [word.lower() for word in _WORD.findall(name)]


def tool_decides_approvals(name: str) -> bool:
    """Whether the name says the tool decides an approval, by the built-in patterns (module docstring)."""
    lowered = name.lower()
    if _DECISION_VERB.search(lowered):
        return True
    words = tool_name_words(name)
    if not words:
        return False
    if _DECISION_NOUNS.intersection(words) and words[0] not in _READ_VERBS:
        return True
    for word in words:
        settles = any(word.startswith(verb) for verb in _SETTLING_VERBS)
        # `grant_approval`, or run together in one word: `grantapproval`.
        if settles and (_APPROVAL_WORD.search(word) or any(_APPROVAL_WORD.search(other) for other in words)):
            return True
    return False


def tool_name_matches(name: str, patterns: Iterable[str]) -> str | None:
    """The first glob of `patterns` matching `name` in any spelling (case-insensitive; matched against
    the name and its words joined by `_`, so `*grant*approval*` also matches `grantApproval`)."""
    spellings = (name.lower(), "_".join(tool_name_words(name)))
    for pattern in patterns:
        lowered = pattern.lower()
        if any(fnmatchcase(spelling, lowered) for spelling in spellings):
            return pattern
    return None


@dataclass(frozen=True)
class ToolPolicy:
    """One server's policy (see the module docstring); `withheld()` says why a tool is not offered."""

    oikos: bool = False
    # Tools of the Oikos server outside its known surface that the operator vouches for.
    allow: tuple[str, ...] = ()
    # Globs of the server's `tools.deny` and of `HERMES_MCP_TOOLS_DENY`.
    deny: tuple[str, ...] = ()

    def withheld(self, tool: str) -> str | None:
        """Why `tool` is never offered, or None when the policy lets it through."""
        pattern = tool_name_matches(tool, self.deny)
        if pattern is not None:
            return f"it matches the denied pattern {pattern!r}"
        if self.oikos and tool in OIKOS_TOOLS:
            return None
        if tool_decides_approvals(tool):
            return "its name says it decides approvals"
        if self.oikos and tool not in self.allow and _OIKOS_SENSITIVE.search(tool.lower()):
            return "it is not in the known Oikos tool surface and touches approvals or executions (tools.allow)"
        return None


_reported: set[tuple[str, str]] = set()


def tool_withheld_report(server: str, tool: str, reason: str) -> None:
    """Say once per process why a server's tool is missing from Hermes's list."""
    if (server, tool) not in _reported:
        _reported.add((server, tool))
        logger.warning("MCP server %s offers %s: Hermes never offers it, because %s", server, tool, reason)
