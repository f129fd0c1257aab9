from __future__ import annotations

from django.apps import AppConfig


class AgentConfig(AppConfig):
    name = "agent"
    verbose_name = "Hermes agent"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Hermes's memory: `remember` proposes a note an operator saves; `notes_search` reads them
        # (agent/memory/tool.py).
        from agent.memory.tool import NOTES_SEARCH, REMEMBER, notes_search_tool, remember_tool
        from agent.tools.local import local_tool_register

        local_tool_register(REMEMBER, remember_tool)
        local_tool_register(NOTES_SEARCH, notes_search_tool)
