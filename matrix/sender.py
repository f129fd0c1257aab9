"""Sending to the homeserver at the rate it accepts.

nio would retry a rate-limited request by itself (sleeping `retry_after_ms`, then sending the
*same* content again); the bridge turns that off (`max_limit_exceeded=0`) and retries here, so a
streaming answer's retry carries the newest text instead of a stale one, and every wait is counted.
A rate limit pauses every send of the bridge, not only the one refused: the homeserver limits the
bot, not one message, and sends that kept going would only be refused in turn.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import ClientError
from nio import AsyncClient, RoomSendError, RoomSendResponse

logger = logging.getLogger(__name__)

LIMIT_EXCEEDED = "M_LIMIT_EXCEEDED"
# When the homeserver rate-limits without saying for how long.
DEFAULT_RETRY_SECONDS = 2.0
# Other failures (a 5xx, a dropped connection): retried this many times, then given up and logged.
FAILURE_RETRIES = 5


@dataclass
class SendStats:
    sent: int = 0
    rate_limited: int = 0
    failed: int = 0


class MatrixSendError(Exception):
    pass


class RoomSender:
    def __init__(self, client: AsyncClient) -> None:
        self.client = client
        self.stats = SendStats()
        # The loop time before which nothing is sent (the homeserver's last `retry_after_ms`).
        self._resume_at = 0.0

    async def send(
        self, room_id: str, content: Callable[[], dict[str, Any]], event_type: str = "m.room.message"
    ) -> str:
        """Send `content()` (rebuilt for every attempt) and return the new event's id.

        Rate limits are waited out as long as they last; other failures are retried a few times,
        then raised as `MatrixSendError`.
        """
        failures = 0
        loop = asyncio.get_running_loop()
        while True:
            pause = self._resume_at - loop.time()
            if pause > 0:
                await asyncio.sleep(pause)
            try:
                response = await self.client.room_send(room_id, event_type, content())
            except (ClientError, OSError, TimeoutError) as exc:  # nio gives up on the first (max_timeouts=0)
                response = RoomSendError(f"{type(exc).__name__}: {exc}")
            if isinstance(response, RoomSendResponse):
                self.stats.sent += 1
                return str(response.event_id)
            if response.status_code == LIMIT_EXCEEDED:
                self.stats.rate_limited += 1
                wait = (response.retry_after_ms or DEFAULT_RETRY_SECONDS * 1000) / 1000
                logger.info("The homeserver rate-limited the bridge: every send waits %.1f s", wait)
                self._resume_at = max(self._resume_at, loop.time() + wait)
                continue
            failures += 1
            if failures > FAILURE_RETRIES:
                self.stats.failed += 1
                raise MatrixSendError(f"{response.status_code or ''} {response.message}".strip())
            await asyncio.sleep(min(2.0**failures * 0.25, 10.0))
