"""Access control's settings, read in one place (docs/configuration.md, "Access control")."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings


@dataclass(frozen=True, kw_only=True)
class AccessConfig:
    """Who may connect and who is asking; read at each use so that tests may change it."""

    # `local`, `proxy` or `django` (hermes_site/settings.py says what each means).
    auth: str
    # Who every request acts as in `local` mode.
    local_operator: str
    # Validated, normalised networks (hermes_site/environment.py `Networks`).
    trusted_proxy_cidrs: tuple[str, ...]
    allowed_cidrs: tuple[str, ...]
    # Proxy groups whose members get the admin.
    staff_groups: tuple[str, ...]
    # The address Daphne was told to listen on ("" when unknown).
    bind: str

    @classmethod
    def from_settings(cls) -> AccessConfig:
        return cls(
            auth=settings.HERMES_AUTH,
            local_operator=settings.HERMES_LOCAL_OPERATOR,
            trusted_proxy_cidrs=tuple(settings.HERMES_TRUSTED_PROXY_CIDRS),
            allowed_cidrs=tuple(settings.HERMES_ALLOWED_CIDRS),
            staff_groups=tuple(settings.HERMES_STAFF_GROUPS),
            bind=settings.HERMES_BIND,
        )
