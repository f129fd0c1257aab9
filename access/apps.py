from __future__ import annotations

from django.apps import AppConfig


class AccessConfig(AppConfig):
    name = "access"
    verbose_name = "Access control"

    def ready(self) -> None:
        # Registers the system checks (`manage.py check`, `check --deploy`).
        from access import checks  # noqa: F401
