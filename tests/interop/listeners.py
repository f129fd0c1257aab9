"""A TCP port that tells whether anything connected to it (for "refused without connecting")."""

from __future__ import annotations

import socket
from types import TracebackType


class SilentListener:
    """Listens on 127.0.0.1 and never answers; connections wait in the backlog, where `connections()`
    counts them. A client that was refused before connecting leaves the backlog empty."""

    def __init__(self) -> None:
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.bind(("127.0.0.1", 0))
        self._socket.listen(16)
        self._socket.setblocking(False)
        self.url = f"http://127.0.0.1:{self._socket.getsockname()[1]}"
        self._accepted = 0

    def connections(self) -> int:
        while True:
            try:
                connection, _ = self._socket.accept()
            except BlockingIOError:
                return self._accepted
            connection.close()
            self._accepted += 1

    def close(self) -> None:
        self._socket.close()

    def __enter__(self) -> SilentListener:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()
