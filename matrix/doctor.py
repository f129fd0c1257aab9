"""`doctor`'s Matrix row: is the homeserver reachable, is the bot's token valid, has it joined its
rooms, is any of them encrypted (which the bridge refuses), and does a `manage.py matrix_bridge` run?

Plain client-API requests, no sync: `doctor` must not move the bridge's position nor be slow.
"""

from __future__ import annotations

import time
from urllib.parse import quote

import httpx2
from channels.db import database_sync_to_async

from agent.doctor.checks import CheckResult, Status
from matrix.config import MatrixConfigError, MatrixSettings, matrix_configured
from matrix.selectors import bridges_running

NAME = "matrix"


async def matrix_check(seconds: float) -> CheckResult:
    if not matrix_configured():
        return CheckResult(NAME, Status.SKIP, "the Matrix bridge is not configured (HERMES_MATRIX_HOMESERVER)")
    try:
        config = MatrixSettings.from_settings()
    except MatrixConfigError as exc:
        return CheckResult(NAME, Status.FAIL, str(exc))
    started = time.monotonic()
    headers = {"Authorization": f"Bearer {config.access_token}"}
    client_api = f"{config.homeserver}/_matrix/client/v3"
    try:
        async with httpx2.AsyncClient(timeout=seconds) as http:
            versions = await http.get(f"{config.homeserver}/_matrix/client/versions")
            if versions.status_code != 200:
                return _fail(f"{config.homeserver}: HTTP {versions.status_code} for the client API versions", started)
            whoami = await http.get(f"{client_api}/account/whoami", headers=headers)
            if whoami.status_code in (401, 403):
                return _fail(
                    f"{config.homeserver}: the access token was rejected (HTTP {whoami.status_code}); "
                    "check HERMES_MATRIX_ACCESS_TOKEN",
                    started,
                )
            whoami.raise_for_status()
            user_id = str(whoami.json().get("user_id", ""))
            if user_id != config.user_id:
                return _fail(f"the access token is {user_id}'s, not HERMES_MATRIX_USER_ID {config.user_id}", started)
            joined_rooms = await http.get(f"{client_api}/joined_rooms", headers=headers)
            joined_rooms.raise_for_status()
            joined = set(joined_rooms.json().get("joined_rooms", []))
            encrypted = []
            for room_id in sorted(config.rooms & joined):
                state = await http.get(f"{client_api}/rooms/{quote(room_id)}/state/m.room.encryption/", headers=headers)
                if state.status_code == 200:
                    encrypted.append(room_id)
    except (httpx2.HTTPError, ValueError) as exc:
        return _fail(f"{config.homeserver}: unreachable or failing ({type(exc).__name__}: {exc})", started)
    missing = sorted(config.rooms - joined)
    if encrypted:
        return _fail(
            f"encrypted room(s) {', '.join(encrypted)}: the bridge does not support end-to-end encryption and "
            "ignores them; use unencrypted rooms",
            started,
        )
    if missing:
        return _fail(f"{config.user_id} has not joined {', '.join(missing)}: invite it (it joins on start)", started)
    detail = (
        f"{config.user_id} on {config.homeserver}: token valid, {len(config.rooms)} room(s) joined, none encrypted, "
        f"{len(config.operators)} operator(s)"
    )
    try:
        running = await database_sync_to_async(bridges_running)()
    except Exception as exc:
        return CheckResult(
            NAME, Status.WARN, f"{detail}; cannot read whether a bridge runs ({exc})", _elapsed_ms(started)
        )
    if not running:
        return CheckResult(
            NAME, Status.WARN, f"{detail}; but no `manage.py matrix_bridge` is running", _elapsed_ms(started)
        )
    return CheckResult(NAME, Status.OK, f"{detail}; {running} bridge(s) running", _elapsed_ms(started))


def _fail(detail: str, started: float) -> CheckResult:
    return CheckResult(NAME, Status.FAIL, detail, _elapsed_ms(started))


def _elapsed_ms(started: float) -> int:
    return round((time.monotonic() - started) * 1000)
