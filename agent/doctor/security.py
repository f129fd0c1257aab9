"""Settings that work but are unsafe together, as `(topic, explanation)` pairs for `doctor`.

The access-control settings (`HERMES_AUTH`, `HERMES_TRUSTED_PROXY_CIDRS`) are read from Django
settings when defined there, else from the environment, so these checks say the same thing
whichever part of Hermes interprets them.
"""

from __future__ import annotations

import ipaddress
import os
from urllib.parse import urlsplit

from django.conf import settings

from hermes_site.environment import env_list

_TRUE = {"1", "true", "yes", "on"}


def security_checks(*, bind: str | None = None) -> list[tuple[str, str]]:
    """Insecure combinations; `bind` is the listening address (`--bind`, else `HERMES_BIND`)."""
    address = bind or os.environ.get("HERMES_BIND") or "127.0.0.1"
    auth = auth_mode()
    findings: list[tuple[str, str]] = []
    if auth == "local" and not address_is_loopback(address):
        findings.append(
            (
                "auth",
                f"HERMES_AUTH=local while listening on {address}: everyone who can reach it acts as the local "
                "operator; use HERMES_AUTH=proxy or django, or listen on loopback",
            )
        )
    if auth == "proxy":
        findings.extend(_proxy_findings())
    if settings.DEBUG:
        findings.append(("debug", "HERMES_DEBUG is on: error pages show settings and code; turn it off"))
    if settings.SECRET_KEY.startswith("django-insecure"):
        findings.append(
            ("secret key", "HERMES_SECRET_KEY is not set: the public development key lets anyone forge sessions")
        )
    if "*" in settings.ALLOWED_HOSTS:
        findings.append(("allowed hosts", "HERMES_ALLOWED_HOSTS contains '*': name the hosts Hermes is reached by"))
    model_url = urlsplit(settings.ANTHROPIC_BASE_URL or "")
    if settings.ANTHROPIC_API_KEY and model_url.scheme == "http" and not address_is_loopback(model_url.hostname or ""):
        findings.append(
            ("model api", f"ANTHROPIC_API_KEY is sent unencrypted to {model_url.hostname}: use https, or no key")
        )
    return findings


def auth_mode() -> str:
    configured = getattr(settings, "HERMES_AUTH", None)
    if configured:
        return str(configured)
    if os.environ.get("HERMES_TRUSTED_PROXY", "").strip().lower() in _TRUE:
        return "proxy"
    return os.environ.get("HERMES_AUTH", "").strip().lower() or "local"


def address_is_loopback(address: str) -> bool:
    host = address.strip().strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name could resolve to anything


def _proxy_findings() -> list[tuple[str, str]]:
    configured = getattr(settings, "HERMES_TRUSTED_PROXY_CIDRS", None)
    cidrs = [str(item) for item in configured] if configured else env_list("HERMES_TRUSTED_PROXY_CIDRS")
    if not cidrs:
        return [
            (
                "trusted proxy",
                "HERMES_AUTH=proxy without HERMES_TRUSTED_PROXY_CIDRS: identity headers are trusted from nowhere",
            )
        ]
    everywhere = [cidr for cidr in cidrs if cidr.strip().endswith("/0")]
    if everywhere:
        return [
            (
                "trusted proxy",
                f"HERMES_TRUSTED_PROXY_CIDRS includes {', '.join(everywhere)}: anyone can claim to be any operator",
            )
        ]
    return []
