"""Settings that work but are unsafe together, as `(topic, explanation)` pairs for `doctor`.

The access-control findings come from `access` itself (the same words `manage.py check` uses), so
`doctor`, the start-up warning and the system checks never disagree.
"""

from __future__ import annotations

import os
from urllib.parse import urlsplit

from django.conf import settings

from access.config import AccessConfig
from access.exposure import local_mode_exposure
from access.networks import address_is_loopback, allowed_networks, trusted_proxy_networks
from agent.llm import ModelConfig


def security_checks(*, bind: str | None = None) -> list[tuple[str, str]]:
    """Insecure combinations; `bind` is the listening address (`--bind`, else `HERMES_BIND`)."""
    address = bind or os.environ.get("HERMES_BIND") or "127.0.0.1"
    findings: list[tuple[str, str]] = []
    exposure = local_mode_exposure(address)
    if exposure:
        findings.append(("auth", exposure))
    everywhere = [str(network) for network in trusted_proxy_networks() if network.prefixlen == 0]
    if AccessConfig.from_settings().auth == "proxy" and everywhere:
        findings.append(
            (
                "trusted proxy",
                f"HERMES_TRUSTED_PROXY_CIDRS includes {', '.join(everywhere)}: anyone can claim to be any operator",
            )
        )
    if any(network.prefixlen == 0 for network in allowed_networks()):
        findings.append(("mesh only", "HERMES_ALLOWED_CIDRS admits every address: list the mesh and the proxy"))
    if settings.DEBUG:
        findings.append(("debug", "HERMES_DEBUG is on: error pages show settings and code; turn it off"))
    if "*" in settings.ALLOWED_HOSTS:
        findings.append(("allowed hosts", "HERMES_ALLOWED_HOSTS contains '*': name the hosts Hermes is reached by"))
    model = ModelConfig.from_settings()
    model_url = urlsplit(model.base_url or "")
    if model.api_key and model_url.scheme == "http" and not address_is_loopback(model_url.hostname or ""):
        findings.append(
            ("model api", f"ANTHROPIC_API_KEY is sent unencrypted to {model_url.hostname}: use https, or no key")
        )
    return findings
