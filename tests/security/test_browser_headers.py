"""The headers that make a browser refuse what Hermes never meant: foreign scripts, framing, sniffing."""

from __future__ import annotations

import re
import uuid

import pytest
from django.conf import settings
from django.utils import timezone
from pytest_django.fixtures import Settings

from agent.models import Activity, AgentSession, Message
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


async def test_the_admin_pages_keep_to_the_policy() -> None:
    """The admin is served under the same strict policy, so its pages carry no inline style or script
    (a `style` attribute on a transcript was blocked by the browser, and the page lost its layout)."""
    session = await AgentSession.objects.acreate(title="caddy", actor="operator:operator", origin="ui")
    await Message.objects.acreate(session=session, role="user", content=[{"type": "text", "text": "restart caddy"}])
    await Message.objects.acreate(
        session=session,
        role="assistant",
        content=[{"type": "tool_use", "id": "toolu_1", "name": "mcp__oikos__request_execution", "input": {}}],
    )
    activity = await Activity.objects.acreate(
        correlation_id=uuid.uuid4(),
        session=session,
        actor="operator:operator",
        server="oikos",
        tool="get_health_summary",
        result={"content": [{"type": "text", "text": "all well"}]},
        started_at=timezone.now(),
    )
    pages = [
        "/admin/",
        "/admin/agent/agentsession/",
        f"/admin/agent/agentsession/{session.pk}/change/",
        "/admin/agent/activity/",
        f"/admin/agent/activity/{activity.pk}/change/",
        "/admin/oikos/approvaldecision/",
    ]
    for path in pages:
        response = await http(path)
        assert response.status == 200, path
        assert response.headers["content-security-policy"] == settings.CONTENT_SECURITY_POLICY, path
        page = response.text
        assert " style=" not in page, path
        assert "<style" not in page, path
        assert not re.search(r"<script(?![^>]*\ssrc=)[^>]*>", page), f"{path} has an inline script"
    transcript = (await http(pages[2])).text
    assert "restart caddy" in transcript and 'class="hermes-block"' in transcript
