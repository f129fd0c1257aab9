"""What one message to a peer produced, whatever the dialect."""

from __future__ import annotations

from dataclasses import dataclass

# Remote states after which the thread cannot go on.
TERMINAL_STATES = frozenset({"failed", "canceled", "rejected"})


@dataclass(frozen=True)
class RemoteReply:
    text: str
    # completed, working, input_required, auth_required, failed, canceled, rejected, unknown
    state: str
    # What continues the thread: the GarraIA task id, or the A2A contextId.
    thread_id: str
    # The remote task that answered (A2A: a new one per message unless it waits for input).
    task_id: str


class PeerCallError(Exception):
    """The peer could not be asked or gave no usable answer. `kind`: `http_status`, `protocol`,
    `timeout`, `connect`."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
