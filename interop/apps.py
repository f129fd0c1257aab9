from __future__ import annotations

from django.apps import AppConfig


class InteropConfig(AppConfig):
    name = "interop"
    verbose_name = "Agent interop"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # The hub learns about interop only through its two extension points.
        from agent.tools.envelopes import envelope_register
        from agent.tools.local import local_tool_register
        from interop.garra_envelope import GarraAskEnvelope
        from interop.tool import a2a_send_tool_from_settings

        envelope_register(GarraAskEnvelope())
        local_tool_register("a2a_send", a2a_send_tool_from_settings)
