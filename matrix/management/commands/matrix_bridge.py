"""`manage.py matrix_bridge`: Hermes in the operators' Matrix room (matrix/bridge.py).

Runs until SIGTERM or Ctrl-C; on SIGTERM its running turns end `interrupted` (partial answers
kept, and their Matrix messages say so), as in every Hermes process.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from agent import presence
from agent.engine.runner import turns_shutdown
from agent.live import turn_registry_close
from agent.tools.config import MCPConfigError
from agent.tools.hub import tool_hub
from matrix.bridge import MatrixBridge
from matrix.config import MatrixConfigError, MatrixSettings


class Command(BaseCommand):
    help = "Serve Hermes in the Matrix rooms of HERMES_MATRIX_ROOMS, to the operators of HERMES_MATRIX_OPERATORS."

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            config = MatrixSettings.from_settings()
        except MatrixConfigError as exc:
            raise CommandError(str(exc)) from None
        presence.presence_start("matrix")
        try:
            with contextlib.suppress(KeyboardInterrupt):
                asyncio.run(_serve(config))
        finally:
            presence.presence_stop()


async def _serve(config: MatrixSettings) -> None:
    try:
        hub = tool_hub()
    except MCPConfigError as exc:
        raise CommandError(str(exc)) from None
    bridge = MatrixBridge(config=config, hub=hub)
    serving = asyncio.ensure_future(bridge.run())
    terminated = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, terminated.set)
    print(f"serving Matrix as {config.user_id} in {len(config.rooms)} room(s)", flush=True)
    try:
        await asyncio.wait({serving, asyncio.ensure_future(terminated.wait())}, return_when=asyncio.FIRST_COMPLETED)
        if serving.done():
            serving.result()  # a bridge that stopped by itself says why
        serving.cancel()
        await turns_shutdown(reason="Hermes's Matrix bridge was stopped (SIGTERM) while answering.")
    finally:
        serving.cancel()
        await asyncio.gather(serving, return_exceptions=True)
        await bridge.aclose()
        await turn_registry_close()
        await hub.aclose()
