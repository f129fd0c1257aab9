from __future__ import annotations

from django.apps import AppConfig


class OikosConfig(AppConfig):
    """Hermes's side of Oikos's REST API: the client, the live relay, the rail, approvals, card context."""

    name = "oikos"
    verbose_name = "Oikos"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from oikos.metrics import executions_collector_register

        executions_collector_register()
