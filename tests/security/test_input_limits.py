"""Oversized input is refused at the edge with a clear answer, before any part of Hermes handles it."""

from __future__ import annotations

import pytest
from django.contrib.sessions.models import Session
from pytest_django.fixtures import Settings

from tests.security.asgi_client import http

pytestmark = pytest.mark.django_db(transaction=True)

FORM = ("content-type", "application/x-www-form-urlencoded")


@pytest.fixture(autouse=True)
def small_limit(settings: Settings) -> int:
    settings.HERMES_MAX_REQUEST_BYTES = 4096
    settings.HERMES_A2A_MAX_BODY_BYTES = 4096
    return 4096


async def test_a_declared_oversized_body_is_refused_before_it_is_read() -> None:
    response = await http(
        "/accounts/login/", method="POST", headers=[FORM, ("content-length", str(10 * 1024 * 1024))], body=b""
    )

    assert response.status == 413
    assert response.json()["error"] == {
        "code": "request_too_large",
        "message": "The body is larger than the limit of 4,096 bytes.",
    }


async def test_a_chunked_body_is_cut_off_as_soon_as_it_outgrows_the_limit() -> None:
    response = await http("/accounts/login/", method="POST", headers=[FORM], chunks=[b"a" * 3000, b"b" * 3000, b"c"])

    assert response.status == 413
    assert response.json()["error"]["code"] == "request_too_large"
    assert not await Session.objects.aexists()


async def test_a_body_within_the_limit_reaches_hermes() -> None:
    # Django answers (CSRF refuses this form post): the edge let it through.
    response = await http("/accounts/login/", method="POST", headers=[FORM], chunks=[b"a" * 3000, b"b" * 1000])

    assert response.status == 403
    assert b"CSRF" in response.body
