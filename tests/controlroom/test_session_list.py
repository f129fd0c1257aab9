"""The session list reads at a glance: whole titles on hover, where each session came from."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from agent.models import AgentSession
from watch.services import ORIGIN as INVESTIGATION_ORIGIN

pytestmark = pytest.mark.django_db

LONG_TITLE = "why did the nightly backup of the postgres volume fail twice this week on pbs"


def _entry(page: str, title: str) -> str:
    """The list item of the session titled `title`."""
    found = re.search(rf'<li><a [^>]*title="{re.escape(title)}".*?</li>', page, re.S)
    assert found, f"no session titled {title!r} in the list"
    return found.group(0)


def test_a_long_title_is_listed_whole_with_the_whole_title_as_its_tooltip(client: Client) -> None:
    AgentSession.objects.create(actor="operator:operator", origin="ui", title=LONG_TITLE)

    entry = _entry(client.get("/ui/").content.decode(), LONG_TITLE)

    assert f'<span class="session-title">{LONG_TITLE}</span>' in entry


@pytest.mark.parametrize(
    ("origin", "badge"),
    [
        ("cli", "ask"),
        ("matrix", "Matrix"),
        ("a2a", "A2A"),
        ("mcp", "MCP"),
        ("api", "API"),
        ("carrier-pigeon", "carrier-pigeon"),
    ],
)
def test_a_session_started_outside_the_control_room_says_where(client: Client, origin: str, badge: str) -> None:
    AgentSession.objects.create(actor="operator:operator", origin=origin, title=f"asked over {origin}")

    entry = _entry(client.get("/ui/sessions/").content.decode(), f"asked over {origin}")

    found = re.search(r'<span class="badge badge-origin" title="([^"]+)">([^<]+)</span>', entry)
    assert found and found.group(2) == badge and found.group(1)


def test_the_control_rooms_own_sessions_and_investigations_carry_no_origin_badge(client: Client) -> None:
    AgentSession.objects.create(actor="operator:operator", origin="ui", title="asked right here")
    # An investigation's session (watch/services.py): its own badge says so once its row exists.
    AgentSession.objects.create(actor="agent:hermes", origin=INVESTIGATION_ORIGIN, title="disk_full on service:pbs")

    page = client.get("/ui/").content.decode()

    assert "badge-origin" not in _entry(page, "asked right here")
    assert "badge-origin" not in _entry(page, "disk_full on service:pbs")
