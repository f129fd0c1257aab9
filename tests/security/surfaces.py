"""Every surface Hermes serves, for the tests that must hold on all of them.

A route added to Hermes belongs here, so that the network check, the identity rules and the CSRF
rules are proven on it too.
"""

from __future__ import annotations

SESSION = "0b7c61c5-2f4e-4d7e-9a55-7d7fbd1c2a10"

# (method, path) of every HTTP surface that needs an operator identity.
HTTP_SURFACES: list[tuple[str, str]] = [
    ("GET", "/admin/"),
    ("GET", "/admin/agent/agentsession/"),
    ("POST", "/chat"),
    ("GET", "/sessions"),
    ("GET", f"/sessions/{SESSION}"),
    ("GET", f"/sessions/{SESSION}/export.md"),
    ("GET", f"/sessions/{SESSION}/export.json"),
    ("GET", "/search?q=postgres"),
    ("GET", f"/turns/{SESSION}/events"),
    ("POST", "/query"),
    ("GET", "/openapi.json"),
    ("GET", "/"),
    ("GET", "/ui/"),
    ("GET", f"/ui/s/{SESSION}/"),
    ("POST", "/ui/ask/"),
    ("POST", f"/ui/turns/{SESSION}/stop/"),
    ("POST", "/ui/drawer/new/"),
    ("GET", "/ui/sessions/"),
    ("GET", "/ui/sessions/nav/"),
    ("GET", "/ui/ledger/"),
    ("GET", "/ui/search/?q=postgres"),
    ("GET", "/ui/approvals/"),
    ("POST", "/ui/approvals/decide/"),
    ("GET", "/notes"),
    ("POST", "/notes"),
    ("GET", "/notes/1"),
    ("PATCH", "/notes/1"),
    ("GET", "/ui/notes/"),
    ("GET", "/ui/notes/list/"),
    ("POST", "/ui/notes/new/"),
    ("GET", "/ui/notes/1/"),
    ("POST", "/ui/notes/1/"),
    ("POST", "/ui/notes/1/active/"),
    ("GET", "/ui/servers/"),
    ("POST", "/ui/servers/notes/connect/"),
    ("GET", "/ui/servers/callback/?state=s&code=c"),
]

# Paths served without an identity (the probes; the login form in `django` mode); still mesh-only.
PUBLIC_HTTP_SURFACES: list[tuple[str, str]] = [
    ("GET", "/healthz"),
    ("GET", "/accounts/login/"),
    ("GET", "/metrics"),
]

# The A2A routes, mounted in front of Django: they check their own pairing tokens.
A2A_SURFACES: list[tuple[str, str]] = [
    ("GET", "/.well-known/agent-card.json"),
    ("GET", "/.well-known/agent.json"),
    ("POST", "/a2a/"),
    ("POST", "/a2a/jsonrpc"),
    ("POST", "/a2a/rest/message:send"),
    ("GET", "/a2a/rest/tasks/t-1"),
    ("POST", "/a2a/tasks"),
    ("GET", "/a2a/tasks/t-1"),
    ("POST", "/a2a/tasks/t-1/cancel"),
]

# Every websocket path.
WEBSOCKET_SURFACES: list[str] = ["/ws/ui/", "/ws/ui/?rail=1&sessions=1", "/ws/ui/?approvals=1"]
