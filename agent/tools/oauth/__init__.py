"""Hermes's MCP OAuth client, on the `mcp` SDK's client auth support (`mcp.client.auth`).

- `settings`: the per-server `"hermes": {"oauth": {...}}` options (`OAuthConfig`).
- `sealing`: what is stored secret is sealed with a key derived from Django's secret key.
- `storage`: the SDK's `TokenStorage` on the database (`agent.models.McpCredential`).
- `providers`: the SDK provider for a configured server (authorization code with PKCE, or client
  credentials), and what a process without a person does when a server needs one.
- `connect`: the authorization-code flow an operator starts from the control room's Servers page.

The package's `__init__` imports nothing: `agent.tools.config` reads `settings` while `providers`
reads `agent.tools.config`.
"""
