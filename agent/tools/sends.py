"""Which HTTP requests to an MCP server may have reached it, so a failed call can be told apart:
refused while connecting (never sent: "not run") or lost after it may have arrived ("may have run").

The SDK's Streamable HTTP client sends each request from a task of its own and reports any failure
as the connection closing, whatever the cause; only the HTTP transport underneath still knows
whether a request was written. An open connection to a server that has since gone away learns it
only on its next request, which is refused at connect.
"""

from __future__ import annotations

import httpx2

# Raised before a request is written: no connection could be opened for it.
_NEVER_SENT = (httpx2.ConnectError, httpx2.ConnectTimeout)


class SendNotingTransport(httpx2.AsyncBaseTransport):
    """Wraps a transport and numbers its requests, noting each one that may have reached the server."""

    def __init__(self, inner: httpx2.AsyncBaseTransport) -> None:
        self._inner = inner
        self._next = 0
        self._in_flight: set[int] = set()
        self._highest_reached = -1

    def mark(self) -> int:
        """A point in the sequence of requests; see `reached_since`."""
        return self._next

    def reached_since(self, mark: int) -> bool:
        """Whether a request started at or after `mark` may have reached the server: one not yet
        settled counts, as it may still be written."""
        return self._highest_reached >= mark or any(number >= mark for number in self._in_flight)

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        number = self._next
        self._next += 1
        self._in_flight.add(number)
        try:
            response = await self._inner.handle_async_request(request)
        except _NEVER_SENT:
            raise
        except BaseException:
            self._highest_reached = max(self._highest_reached, number)
            raise
        finally:
            self._in_flight.discard(number)
        self._highest_reached = max(self._highest_reached, number)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()
