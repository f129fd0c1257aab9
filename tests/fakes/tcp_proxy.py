"""A TCP proxy the test controls, in front of a real server (PostgreSQL): `cut()` drops every
connection through it and refuses new ones, as a network blip or a database restart would;
`restore()` lets connections through again.

    with TcpProxy("127.0.0.1", 5432) as proxy:
        url = f"postgres://postgres@127.0.0.1:{proxy.port}/hermes"
        proxy.cut()      # both sides of every connection closed: the server ends its sessions
        proxy.restore()

Plain sockets and threads: two pump threads per connection, one accept thread.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from types import TracebackType


class TcpProxy:
    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self.upstream = (upstream_host, upstream_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._blocked = False
        self._closed = False
        threading.Thread(target=self._accept, name="tcp-proxy-accept", daemon=True).start()

    def cut(self) -> None:
        """Close every connection through the proxy, both ends; refuse new ones until `restore()`."""
        with self._lock:
            self._blocked = True
            sockets, self._open = self._open, set()
        for sock in sockets:
            _close(sock)

    def restore(self) -> None:
        with self._lock:
            self._blocked = False

    def close(self) -> None:
        self._closed = True
        self.cut()
        _close(self._listener)

    def __enter__(self) -> TcpProxy:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _address = self._listener.accept()
            except OSError:
                return
            with self._lock:
                blocked = self._blocked
            if blocked:
                _close(client)
                continue
            try:
                server = socket.create_connection(self.upstream, timeout=5)
                server.settimeout(None)
            except OSError:
                _close(client)
                continue
            with self._lock:
                if self._blocked:
                    _close(client)
                    _close(server)
                    continue
                self._open |= {client, server}
            for source, target in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(source, target), daemon=True).start()

    def _pump(self, source: socket.socket, target: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                target.sendall(data)
        except OSError:
            pass
        finally:
            with self._lock:
                self._open.discard(source)
                self._open.discard(target)
            _close(source)
            _close(target)


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        sock.close()
