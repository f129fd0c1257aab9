"""A stdio MCP server's stderr, relayed line by line into Hermes's log.

The SDK's `stdio_client` hands the child process whatever `errlog` file it is given — by default
Hermes's own stderr, so anything a server printed (a token in a startup banner, a traceback quoting
a credential) went out raw, past the log filters and in no log format. Each stdio connection gets a
pipe instead; a thread reads it and logs every line through `agent.tools.stderr` (level INFO), so
the line is redacted (`common.logs.RedactFilter`), formatted and tagged with the server's name like
any other record. Lines are capped at `MAX_LINE_CHARS`.

A thread, not a task: the pipe is read with blocking calls, and the thread ends by itself at EOF,
once the process has exited and the connection has closed its end.
"""

from __future__ import annotations

import logging
import os
import threading
from types import TracebackType
from typing import TextIO

logger = logging.getLogger(__name__)

# A line longer than this is cut: a server dumping a blob on one line fills no log.
MAX_LINE_CHARS = 2000


class StderrRelay:
    """A pipe for one stdio server's stderr. Use as a context manager around the connection:
    `stream` is what the child writes to; leaving the context closes Hermes's copy of it."""

    def __init__(self, *, server: str) -> None:
        self.server = server
        read_fd, write_fd = os.pipe()
        self.stream: TextIO = os.fdopen(write_fd, "w", encoding="utf-8")
        self._thread = threading.Thread(target=self._relay, args=(read_fd,), name=f"mcp-stderr-{server}", daemon=True)
        self._thread.start()

    def __enter__(self) -> StderrRelay:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.stream.close()

    def _relay(self, read_fd: int) -> None:
        with os.fdopen(read_fd, "rb") as pipe:
            for raw in pipe:
                line = raw.decode("utf-8", errors="replace").rstrip()
                if not line:
                    continue
                if len(line) > MAX_LINE_CHARS:
                    line = f"{line[:MAX_LINE_CHARS]} [cut at {MAX_LINE_CHARS:,} of {len(line):,} characters]"
                logger.info("%s stderr: %s", self.server, line, extra={"server": self.server})
