"""Under Daphne, a request body over the limit is answered 413 while it is still arriving: the client
that has sent only the headers and part of the body already gets the answer."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from tests.fakes.daphne import DaphneServer, LiveDatabase

LIMIT = 64 * 1024
# A failing server never answers; this only bounds how long the test waits to say so.
ANSWER_WAIT_SECONDS = 30


@pytest.fixture(scope="module")
def hermes(live_database: LiveDatabase, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaphneServer]:
    env = {"HERMES_MAX_REQUEST_BYTES": str(LIMIT), "HERMES_A2A_MAX_BODY_BYTES": str(LIMIT)}
    log = tmp_path_factory.mktemp("request-bodies") / "daphne.log"
    with DaphneServer(database=live_database, env=env, log_path=log) as server:
        yield server


@pytest.fixture
def connection(hermes: DaphneServer) -> Iterator[socket.socket]:
    address = urlsplit(hermes.url)
    with socket.create_connection((address.hostname, address.port), timeout=ANSWER_WAIT_SECONDS) as sock:
        yield sock


def answer(sock: socket.socket) -> tuple[int, bytes]:
    """The status and body of the one response on `sock` (read until the server closes its side)."""
    received = b""
    while chunk := sock.recv(65536):
        received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


def headers(extra: str) -> bytes:
    """A form post to the login page (Django reads a form's body for its CSRF check)."""
    form = "Content-Type: application/x-www-form-urlencoded"
    return f"POST /accounts/login/ HTTP/1.1\r\nHost: 127.0.0.1\r\n{form}\r\n{extra}\r\n".encode()


def refusal() -> dict[str, object]:
    return {"error": {"code": "request_too_large", "message": f"The body is larger than the limit of {LIMIT:,} bytes."}}


def test_a_declared_length_over_the_limit_is_answered_before_the_body_is_sent(connection: socket.socket) -> None:
    # A gigabyte announced, a few kilobytes sent: the answer must come without the rest.
    connection.sendall(headers(f"Content-Length: {1024**3}\r\n") + b"username=" + b"x" * 4096)

    status, body = answer(connection)

    assert (status, json.loads(body)) == (413, refusal())


def test_a_chunked_body_is_answered_as_soon_as_it_outgrows_the_limit(connection: socket.socket) -> None:
    connection.sendall(headers("Transfer-Encoding: chunked\r\n"))
    chunk = b"y" * 16 * 1024
    for _ in range(LIMIT // len(chunk) + 1):
        connection.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
    # No last chunk: the body never ends, and the server must not wait for its end.

    status, body = answer(connection)

    assert (status, json.loads(body)) == (413, refusal())


def test_a_body_within_the_limit_is_served(connection: socket.socket) -> None:
    payload = b"username=" + b"z" * (LIMIT - 100)
    connection.sendall(headers(f"Content-Length: {len(payload)}\r\nConnection: close\r\n") + payload)

    status, body = answer(connection)

    # Django answers (its CSRF check refuses this form): the body reached it.
    assert status == 403 and b"CSRF" in body
