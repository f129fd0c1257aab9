"""The lines of the process's stdin, read by the event loop, for `manage.py mcp_serve`.

The MCP SDK's `stdio_server` reads stdin in a worker thread, blocked in `read()` until the client
writes or closes the pipe. A cancelled server cannot take that thread back, and the interpreter
waits for it on exit: a SIGTERM while the client keeps stdin open left the process running. Here
the pipe is registered with the event loop instead (`connect_read_pipe`), so cancelling the server
cancels the read and the process exits.

As the SDK does for its own reader, fd 0 points at the null device while serving, so nothing else
in the process (or a child it starts) reads the protocol's bytes; it is restored on exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import stat
import sys
from collections.abc import AsyncIterator
from typing import Self

# One JSON-RPC message per line; a longer line is dropped (see `StdinLines.__anext__`).
LINE_LIMIT_BYTES = 16 * 1024 * 1024
# Not JSON: the SDK answers it as a parse error on the read stream rather than a message.
DROPPED_LINE = "(a line over the limit was dropped)\n"


class StdinLines:
    """Async iterator over text lines (UTF-8, newline kept) from a `StreamReader`."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> str:
        try:
            line = await self._reader.readline()
        except ValueError:  # over LINE_LIMIT_BYTES: the reader has discarded it
            return DROPPED_LINE
        if not line:
            raise StopAsyncIteration
        return line.decode("utf-8", errors="replace")


@contextlib.asynccontextmanager
async def stdin_lines() -> AsyncIterator[StdinLines | None]:
    """Stdin's lines, or None when stdin is not a pipe, socket or terminal: a regular file or the
    null device cannot be watched by the loop (epoll refuses them), and never blocks a reader, so
    the SDK's own reader is fine there."""
    loop = asyncio.get_running_loop()
    fd = sys.stdin.fileno()
    mode = os.fstat(fd).st_mode
    if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or os.isatty(fd)):
        yield None
        return
    # The loop's copy, which its transport closes at end of input; and one to put back on fd 0.
    private_fd = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    saved_fd = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    pipe = os.fdopen(private_fd, "rb", buffering=0)
    reader = asyncio.StreamReader(limit=LINE_LIMIT_BYTES, loop=loop)
    transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader, loop=loop), pipe)
    null_fd = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null_fd, 0)
    os.close(null_fd)
    try:
        yield StdinLines(reader)
    finally:
        transport.close()
        os.dup2(saved_fd, 0)
        os.close(saved_fd)
        # The loop made the pipe non-blocking, and a terminal's shell shares that flag.
        os.set_blocking(0, True)
