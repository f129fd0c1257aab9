from __future__ import annotations

from typing import TYPE_CHECKING

from django.apps import AppConfig

if TYPE_CHECKING:
    from interop.tool import A2ASendTool


class InteropConfig(AppConfig):
    name = "interop"
    verbose_name = "Agent interop"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # The hub learns about interop only through its two extension points. Nothing here may
        # import the A2A client or server stacks: every process sets Django up, and `manage.py ask`
        # should start like a bare script (tests/test_startup.py).
        from agent.tools.envelopes import envelope_register
        from agent.tools.local import local_tool_register
        from interop.garra_envelope import GarraAskEnvelope

        envelope_register(GarraAskEnvelope())
        local_tool_register("a2a_send", a2a_send_tool_from_settings)


def a2a_send_tool_from_settings() -> A2ASendTool | None:
    """The tool for the configured peers; None (not offered) without any. Raises `PeersConfigError`.

    The A2A client (httpx and its friends) is imported only once a peer is configured."""
    from interop.peers import peers_from_settings

    peers = peers_from_settings()
    if not peers:
        return None
    from interop.tool import A2ASendTool

    return A2ASendTool(peers)
