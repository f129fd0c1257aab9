"""The bridge's configuration, read from settings (docs/matrix.md and docs/configuration.md list the variables)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.conf import settings

_USER_ID = re.compile(r"^@[^:\s]+:\S+$")
_OPERATOR_NAME = re.compile(r"^[A-Za-z0-9_.@-]{1,100}$")


class MatrixConfigError(Exception):
    """The bridge's settings are incomplete or malformed; the message names the variable."""


@dataclass(frozen=True)
class MatrixSettings:
    homeserver: str
    user_id: str
    access_token: str
    rooms: frozenset[str]
    # Matrix user id → operator name (the name Oikos records a decision under).
    operators: dict[str, str]
    edit_seconds: float
    # Where investigations' escalations are posted ("" for nowhere); always one of `rooms`.
    escalation_room: str = ""
    # Where operators open the control room (scheme and host), for links to sessions; "" for none.
    controlroom_url: str = ""

    @classmethod
    def from_settings(cls) -> MatrixSettings:
        missing = [
            name
            for name in ("HERMES_MATRIX_HOMESERVER", "HERMES_MATRIX_USER_ID", "HERMES_MATRIX_ACCESS_TOKEN")
            if not getattr(settings, name, "")
        ]
        if missing:
            raise MatrixConfigError(f"The Matrix bridge is not configured: set {', '.join(missing)}.")
        user_id = settings.HERMES_MATRIX_USER_ID
        if not _USER_ID.match(user_id):
            raise MatrixConfigError(
                f"HERMES_MATRIX_USER_ID must be a Matrix user id like @hermes:example.net, not {user_id!r}."
            )
        escalation_room = getattr(settings, "HERMES_MATRIX_ESCALATION_ROOM", "")
        if escalation_room and not escalation_room.startswith("!"):
            raise MatrixConfigError(
                f"HERMES_MATRIX_ESCALATION_ROOM takes a room id (!abc:example.net), not {escalation_room!r}."
            )
        rooms = frozenset(settings.HERMES_MATRIX_ROOMS) | ({escalation_room} if escalation_room else set())
        if not rooms:
            raise MatrixConfigError("HERMES_MATRIX_ROOMS must list the room ids the bridge serves (!abc:example.net).")
        bad = sorted(room for room in rooms if not room.startswith("!"))
        if bad:
            raise MatrixConfigError(f"HERMES_MATRIX_ROOMS takes room ids (starting with !), not {', '.join(bad)}.")
        return cls(
            homeserver=settings.HERMES_MATRIX_HOMESERVER,
            user_id=user_id,
            access_token=settings.HERMES_MATRIX_ACCESS_TOKEN,
            rooms=rooms,
            operators=operators_parse(settings.HERMES_MATRIX_OPERATORS),
            edit_seconds=settings.HERMES_MATRIX_EDIT_SECONDS,
            escalation_room=escalation_room,
            controlroom_url=getattr(settings, "HERMES_MATRIX_CONTROLROOM_URL", ""),
        )


def matrix_configured() -> bool:
    return bool(getattr(settings, "HERMES_MATRIX_HOMESERVER", ""))


def operators_parse(raw: str) -> dict[str, str]:
    """`@alice:example.net=alice,@bob:example.net=bob` → {Matrix user id: operator name}."""
    operators: dict[str, str] = {}
    for item in (part.strip() for part in raw.split(",")):
        if not item:
            continue
        user_id, _, name = item.partition("=")
        user_id, name = user_id.strip(), name.strip()
        if not _USER_ID.match(user_id) or not _OPERATOR_NAME.match(name):
            raise MatrixConfigError(
                f"HERMES_MATRIX_OPERATORS: {item!r} is not `@user:server=name` (names: letters, digits, _ . @ -)."
            )
        operators[user_id] = name
    if not operators:
        raise MatrixConfigError("HERMES_MATRIX_OPERATORS must map at least one Matrix user to an operator name.")
    return operators
