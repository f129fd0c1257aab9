"""The headers that make a browser refuse what Hermes never meant: foreign scripts, framing, sniffing."""

from __future__ import annotations

import pytest
from pytest_django.fixtures import Settings

from tests.security.asgi_client import http

pytestmark = pytest.mark.django_db(transaction=True)

PAGES = ["/admin/", "/ui/", "/openapi.json", "/no-such-page"]


def _directives(policy: str) -> dict[str, str]:
    return {part.split()[0]: part.strip() for part in policy.split(";") if part.strip()}


@pytest.mark.parametrize("path", PAGES)
async def test_the_content_security_policy_allows_only_our_own_assets(path: str) -> None:
    response = await http(path)

    policy = _directives(response.headers["content-security-policy"])
    assert policy["default-src"] == "default-src 'self'"
    assert policy["script-src"] == "script-src 'self'", "no inline script, no eval, no other origin"
    assert policy["style-src"] == "style-src 'self'"
    assert policy["frame-ancestors"] == "frame-ancestors 'none'"
    assert policy["object-src"] == "object-src 'none'"
    assert policy["base-uri"] == "base-uri 'none'"
    assert policy["form-action"] == "form-action 'self'"


@pytest.mark.parametrize("path", PAGES)
async def test_framing_sniffing_and_referrers_are_denied(path: str) -> None:
    response = await http(path)

    assert response.headers["x-frame-options"] == "DENY"
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["referrer-policy"] == "same-origin"
    assert response.headers["cross-origin-opener-policy"] == "same-origin"


async def test_the_login_page_keeps_to_the_policy(django_mode: Settings) -> None:
    """No inline script or style that the policy would block (and a browser would then break on)."""
    page = (await http("/accounts/login/")).text

    assert "<script" not in page
    assert "<style" not in page
    assert " style=" not in page
    assert " on" not in page.replace(" one", "")
