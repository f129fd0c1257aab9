"""The websocket origin check: exactly our own origin, also behind a TLS-terminating proxy."""

from __future__ import annotations

import pytest
from pytest_django.fixtures import Settings

from access.websocket import websocket_origin_problem
from tests.security.asgi_client import TRUSTED_PROXY

pytestmark = pytest.mark.django_db(transaction=True)


def _scope(*, host: str, origin: str | None, proto: str | None = None, scheme: str = "ws") -> dict:
    headers = [(b"host", host.encode())]
    if origin is not None:
        headers.append((b"origin", origin.encode()))
    if proto is not None:
        headers.append((b"x-forwarded-proto", proto.encode()))
    return {"type": "websocket", "scheme": scheme, "headers": headers, "client": (TRUSTED_PROXY, 1)}


@pytest.mark.parametrize(
    ("host", "origin"),
    [
        ("localhost:8000", "http://localhost:8000"),
        ("127.0.0.1:8000", "http://127.0.0.1:8000"),
        ("localhost", "http://localhost"),
        ("localhost", "http://localhost:80"),
    ],
)
def test_the_page_s_own_origin_passes(host: str, origin: str) -> None:
    assert websocket_origin_problem(_scope(host=host, origin=origin)) is None


@pytest.mark.parametrize(
    ("host", "origin"),
    [
        ("localhost:8000", "http://localhost:6666"),  # another service on the same machine
        ("localhost:8000", "https://localhost:8000"),
        ("localhost:8000", "http://evil.example"),
        ("localhost:8000", "null"),
        ("localhost:8000", None),
        ("evil.example:8000", "http://evil.example:8000"),  # DNS rebinding: the host is not ours
    ],
)
def test_any_other_origin_is_refused(host: str, origin: str | None) -> None:
    assert websocket_origin_problem(_scope(host=host, origin=origin)) is not None


class TestBehindATLSProxy:
    @pytest.fixture(autouse=True)
    def public_host(self, proxy_mode: Settings) -> None:
        proxy_mode.ALLOWED_HOSTS = ["oikos.example.net"]

    def test_the_https_page_passes_when_the_proxy_says_https(self) -> None:
        scope = _scope(host="oikos.example.net", origin="https://oikos.example.net", proto="https")

        assert websocket_origin_problem(scope) is None

    def test_a_plain_http_origin_does_not_pass_as_the_https_site(self) -> None:
        scope = _scope(host="oikos.example.net", origin="http://oikos.example.net", proto="https")

        assert websocket_origin_problem(scope) is not None

    def test_an_extra_origin_may_be_trusted_explicitly(self, proxy_mode: Settings) -> None:
        proxy_mode.CSRF_TRUSTED_ORIGINS = ["https://control.example.net"]
        scope = _scope(host="oikos.example.net", origin="https://control.example.net", proto="https")

        assert websocket_origin_problem(scope) is None
