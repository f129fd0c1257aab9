"""When the database fails under a running turn: the turn ends honestly instead of hanging.

A write that fails mid-turn (PostgreSQL unreachable past the pool's timeout, a disk full, a file
system gone read-only) ends the turn `error` with the code `storage_error`: its end is written once
(bounded by the pool's timeout on PostgreSQL), its followers are told (`error`, then `done`) whether
or not that worked, and an end not yet stored is tried again a bounded number of times, since the
database may come back within seconds. A turn whose end could not be written stays
`running` in the database with no task behind it; this process's next sweep (a question in its
session, a Stop) finds it not running here and marks it `interrupted` (agent/store/).

A turn that another process declared interrupted is fenced (`services.TurnFenced`): it writes nothing
more, and its followers hear that it was interrupted.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Awaitable, Callable

from django import db

from agent.store.turns import TurnFenced

logger = logging.getLogger("agent.engine")

STORAGE_ERROR = "storage_error"
FENCED_MESSAGE = (
    "Another Hermes process took this turn for stopped and marked it interrupted while it ran "
    "(the database was out of reach): nothing more of it was stored. Ask again."
)
# Seconds before each further attempt at writing a failed turn's end.
END_WRITE_DELAYS = (0.5, 1.0, 2.0, 4.0)


def storage_failure(exc: BaseException) -> bool:
    """Whether `exc` is the database failing (unreachable, full, read-only…), not a bug of the turn."""
    if isinstance(exc, db.Error):
        return True
    # The pool raises psycopg's own errors, unwrapped. psycopg is loaded only where PostgreSQL is used
    # (`ask` on SQLite must not pay for it): where it is not loaded, none of its errors can arise.
    psycopg = sys.modules.get("psycopg")
    return psycopg is not None and isinstance(exc, psycopg.Error)


def storage_failure_text(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    reason = lines[0] if lines else type(exc).__name__
    return f"Hermes could not store this turn, so it stopped: the database failed ({reason})."


async def end_write_retried(
    write: Callable[[], Awaitable[None]], *, delays: tuple[float, ...] = END_WRITE_DELAYS
) -> bool:
    """Write a failed turn's end, again after each of `delays` while the database keeps failing.

    Returns whether it was stored (or needed no storing: the turn was fenced meanwhile).
    """
    for attempt, delay in enumerate((*delays, None), start=1):
        try:
            await write()
        except TurnFenced:
            return True
        except Exception as exc:
            if not storage_failure(exc):
                raise
            if delay is None:
                logger.warning(
                    "Could not store the end of a turn whose writes failed (%d attempts): %s",
                    attempt,
                    storage_failure_text(exc),
                )
                return False
            await asyncio.sleep(delay)
            continue
        return True
    return False
