from __future__ import annotations

from django.apps import AppConfig


class OikosConfig(AppConfig):
    """Hermes's side of Oikos's REST API: the client, the live relay, the rail, approvals, card context."""

    name = "oikos"
    verbose_name = "Oikos"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # `changes_since` reads Hermes's record and Oikos's change history (oikos/changes_tool.py).
        from agent.tools.local import local_tool_register
        from oikos.changes_tool import changes_since_tool

        local_tool_register("changes_since", changes_since_tool)

        from oikos.metrics import executions_collector_register

        executions_collector_register()
