"""An ASGI app served by uvicorn on 127.0.0.1, from its own thread and event loop.

The socket is bound (port 0, so the kernel picks a free port) before the thread starts, so the
URL is known and reachable from other processes as soon as `start()` returns. `stop()` sets the
`stopping` event inside the server's loop first: long-lived responses (streams that stall on
purpose) watch it and end, so shutting down never waits on a client.
"""

from __future__ import annotations

import asyncio
import socket
import threading

import uvicorn
from starlette.types import ASGIApp


class LoopbackServer:
    def __init__(self, app: ASGIApp, *, name: str) -> None:
        self._app = app
        self._name = name
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self.url: str | None = None

    @property
    def stopping(self) -> asyncio.Event:
        """Set when stop() begins; only to be awaited from the server's own loop."""
        assert self._server is not None
        assert self._server.stopping is not None
        return self._server.stopping

    def start(self) -> str:
        """Serve the app; returns its base URL (`http://127.0.0.1:<port>`)."""
        if self._thread is not None:
            raise RuntimeError(f"{self._name} is already running")
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.bind(("127.0.0.1", 0))
        host, port = listener.getsockname()
        config = uvicorn.Config(
            self._app,
            lifespan="off",
            http="h11",
            loop="asyncio",
            log_config=None,  # leave the test process's logging alone
            timeout_graceful_shutdown=2,
        )
        server = _Server(config)
        thread = threading.Thread(target=server.run_until_stopped, args=(listener,), name=self._name, daemon=True)
        thread.start()
        server.ready.wait(timeout=10)
        if server.failure is not None or not server.ready.is_set():
            thread.join(timeout=5)
            raise RuntimeError(f"{self._name} failed to start") from server.failure
        self._server, self._thread = server, thread
        self.url = f"http://{host}:{port}"
        return self.url

    def stop(self) -> None:
        """End open responses, shut the server down and join its thread. Idempotent."""
        server, thread = self._server, self._thread
        if server is None or thread is None:
            return
        server.request_stop()
        thread.join(timeout=10)
        if thread.is_alive():
            raise RuntimeError(f"{self._name}'s server thread did not stop")
        self._server = self._thread = None
        self.url = None


class _Server(uvicorn.Server):
    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.ready = threading.Event()
        self.failure: BaseException | None = None
        self.stopping: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def run_until_stopped(self, listener: socket.socket) -> None:
        try:
            asyncio.run(self.serve(sockets=[listener]))
        except BaseException as error:  # reported by start(); the thread must not die silently
            self.failure = error
        finally:
            listener.close()
            self.ready.set()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        self.stopping = asyncio.Event()
        await super().startup(sockets=sockets)
        self.ready.set()

    async def main_loop(self) -> None:
        # Instead of uvicorn's 0.1 s polling: wake exactly when stop() asks.
        assert self.stopping is not None
        await self.stopping.wait()

    def request_stop(self) -> None:
        """Thread-safe: sets `stopping` in the server's loop, which also ends the main loop."""
        loop, stopping = self._loop, self.stopping
        if loop is not None and stopping is not None and not loop.is_closed():
            loop.call_soon_threadsafe(stopping.set)
