"""Request bodies over the limit are refused by Daphne while they arrive, not after.

Daphne (through Twisted's `http.Request`) reads a whole request body — into memory, or a temporary
file past a few hundred kilobytes — before it hands the request to any application. The ASGI edge
(`access.limits`) then refuses it with 413, but only once every byte has been received and stored:
a client sending gigabytes, or a chunked body that never ends, is read to its end first.

Here the same limit is applied inside Daphne's HTTP request, as the body comes in:
- a `Content-Length` over the limit is answered 413 as soon as the headers are in, before one
  byte of the body is read;
- a body without one (`Transfer-Encoding: chunked`) is answered 413 the moment it outgrows the
  limit, and nothing of it is kept.
Either way the answer is the API's error shape (`access.refusals`), the connection is closed after
it, and nothing more of the body is stored. The limit is `access.limits.request_body_limit()`: what the
ASGI edge allows, so a body either layer accepts the other accepts too.

`hermes_site.serve` puts `BoundedHTTPFactory` in place of Daphne's own.
"""

from __future__ import annotations

import logging
from typing import Any

from daphne.http_protocol import HTTPFactory, WebRequest

from access.limits import request_body_limit, request_too_large_message
from access.refusals import refusal_body

logger = logging.getLogger("access")

# How long a refused client may go on sending (its bytes dropped) before the connection is cut.
LINGER_SECONDS = 2.0


class BoundedWebRequest(WebRequest):
    """Daphne's request, refusing a body over the limit while it arrives (see the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.body_received = 0
        self.body_refused = False
        super().__init__(*args, **kwargs)

    def gotLength(self, length: int | None) -> None:
        limit = request_body_limit()
        if length is not None and length > limit:
            # An empty buffer: what still arrives is dropped, never stored.
            super().gotLength(0)
            self._refuse(limit)
            return
        super().gotLength(length)

    def handleContentChunk(self, data: bytes) -> None:
        if self.body_refused:
            return
        self.body_received += len(data)
        limit = request_body_limit()
        if self.body_received > limit:
            self._refuse(limit)
            return
        super().handleContentChunk(data)

    def process(self) -> Any:
        # A refused body that happened to arrive whole in the same read still never reaches the app.
        if self.body_refused:
            return None
        return super().process()

    def _refuse(self, limit: int) -> None:
        self.body_refused = True
        logger.warning(
            "refused %s %s: body over %d bytes",
            self.method.decode("latin-1", "replace"),
            self.uri.decode("latin-1", "replace")[:200],
            limit,
        )
        # No "100 Continue" after the answer: Twisted sends one for `Expect` once the length is known.
        self.requestHeaders.removeHeader(b"Expect")
        body = refusal_body("request_too_large", request_too_large_message(limit))
        head = (
            b"HTTP/1.1 413 Content Too Large\r\n"
            b"Content-Type: application/json\r\n"
            b"Content-Length: " + str(len(body)).encode("ascii") + b"\r\n"
            b"Connection: close\r\n\r\n"
        )
        self.channel.persistent = False
        transport = self.channel.transport
        transport.write(head + body)
        # The answer, then our side closed. Closing outright while the client is still sending
        # would leave its bytes unread, and the kernel would reset the connection, possibly before
        # the client read the 413; so what it still sends is read and dropped (`body_refused`)
        # until it closes, or for LINGER_SECONDS at most.
        transport.loseWriteConnection()
        self.channel.callLater(LINGER_SECONDS, transport.abortConnection)


class BoundedHTTPFactory(HTTPFactory):
    """Daphne's HTTP factory, building `BoundedWebRequest`s."""

    def buildProtocol(self, addr: Any) -> Any:
        protocol = super().buildProtocol(addr)
        protocol.requestFactory = BoundedWebRequest
        return protocol
