"""oikos_sim: an in-memory stand-in for Oikos, the homelab control plane Hermes operates.

It speaks Oikos's wire contract (the 28-tool MCP surface at ``/mcp`` and the REST API at
``/api/v1``) over a seeded, deterministic Proxmox homelab, for development, demos and tests.
It is not Oikos: nothing here touches a real machine.
"""

from __future__ import annotations
