"""System checks for access control: `manage.py check` and `check --deploy` report what is unsafe."""

from __future__ import annotations

from typing import Any

from django.core.checks import Tags, Warning, register

from access.config import AccessConfig
from access.exposure import local_mode_exposure
from access.networks import allowed_networks


@register(Tags.security)
def local_mode_beyond_loopback(app_configs: Any, **kwargs: Any) -> list[Warning]:
    problem = local_mode_exposure()
    return [Warning(problem, id="access.W001")] if problem else []


@register(Tags.security, deploy=True)
def local_mode_deployed(app_configs: Any, **kwargs: Any) -> list[Warning]:
    if AccessConfig.from_settings().auth != "local":
        return []
    return [
        Warning(
            "HERMES_AUTH=local: every connection from the allowed networks acts as the operator.",
            hint="Deploy with HERMES_AUTH=proxy (behind Authentik) or HERMES_AUTH=django.",
            id="access.W002",
        )
    ]


@register(Tags.security, deploy=True)
def mesh_only_disabled(app_configs: Any, **kwargs: Any) -> list[Warning]:
    if not any(network.prefixlen == 0 for network in allowed_networks()):
        return []
    return [
        Warning(
            "HERMES_ALLOWED_CIDRS admits every address: mesh_only is off.",
            hint="List the mesh (e.g. 100.64.0.0/10) and the proxy's network instead.",
            id="access.W003",
        )
    ]
