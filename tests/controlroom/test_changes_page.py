"""The Changes page: Hermes's record of the executions it asked for, filterable, kept current by
its socket when a change is recorded or moves on."""

from __future__ import annotations

import datetime
import html

import pytest
from django.test import Client

from agent.broadcast import changes_changed_publish
from agent.models import AgentSession, Turn
from agent.store.changes import followup_claim, followup_started, verdict_record
from tests.controlroom.conftest import Connect
from tests.fakes.change_rows import change_row

pytestmark = pytest.mark.django_db(transaction=True)

NOW = datetime.datetime(2026, 12, 6, 12, 0, tzinfo=datetime.UTC)
HOSTILE = '<img src=x onerror="alert(1)">'


@pytest.fixture
def checked() -> AgentSession:
    """A restart of sonarr, checked and cleared; a failed deploy of jellyfin; an older postgres restart."""
    session = AgentSession.objects.create(title="sonarr is degraded", actor="operator:alice", origin="ui")
    change_row("exe-old", target="service:postgres", at=NOW - datetime.timedelta(days=2), status="completed")
    change_row(
        "exe-deploy",
        target="service:jellyfin",
        action="deploy",
        at=NOW - datetime.timedelta(hours=5),
        session=session,
        status="failed",
        decided_by="operator:bob",
        error=f"No space left on device {HOSTILE}",
    )
    restart = change_row(
        "exe-restart", at=NOW - datetime.timedelta(hours=1), session=session, status="completed", decided_by="policy"
    )
    followup = Turn.objects.create(session=session, actor="agent:hermes")
    followup_claim(execution_id="exe-restart", instance=None)
    followup_started(execution_id="exe-restart", turn_id=followup.id)
    verdict_record(execution_id="exe-restart", verdict="cleared", detail="sonarr healthy, probes green")
    assert restart.correlation_id is not None
    return session


def _rows(page: str) -> list[str]:
    return [part.split('"', 1)[0] for part in page.split('data-execution="')[1:]]


def test_lists_every_change_newest_first_with_its_session_turn_verdict_and_outcome(
    client: Client, checked: AgentSession
) -> None:
    page = client.get("/ui/changes/").content.decode()

    assert _rows(page) == ["exe-restart", "exe-deploy", "exe-old"]
    restart = client.get("/changes", {"target": "service:sonarr"}).json()["changes"][0]
    assert f'href="/ui/s/{checked.id}/#turn-{restart["turn_id"]}"' in page
    assert f'href="/ui/s/{checked.id}/#turn-{restart["followup_turn_id"]}"' in page
    assert 'class="badge change-verdict verdict-cleared">cleared<' in page
    assert "sonarr healthy, probes green" in page
    # Oikos's error is text, never markup.
    assert html.escape(HOSTILE) in page and HOSTILE not in page
    assert 'aria-current="page">Changes<' in page


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({"target": "service:jellyfin"}, ["exe-deploy"]),
        ({"target": "service:"}, ["exe-restart", "exe-deploy", "exe-old"]),
        ({"since": "2026-12-06"}, ["exe-restart", "exe-deploy"]),
        ({"until": "2026-12-06T08:00:00Z"}, ["exe-deploy", "exe-old"]),
    ],
)
def test_filters_by_target_and_time(
    client: Client, checked: AgentSession, query: dict[str, str], expected: list[str]
) -> None:
    assert _rows(client.get("/ui/changes/", query).content.decode()) == expected
    assert _rows(client.get("/ui/changes/list/", query).content.decode()) == expected


def test_a_bad_filter_says_what_it_takes(client: Client, checked: AgentSession) -> None:
    page = client.get("/ui/changes/", {"since": "last week"}).content.decode()
    assert "since must be an ISO 8601 date and time" in page and _rows(page) == []


async def test_the_open_page_fetches_its_list_again_when_a_change_is_published(socket: Connect) -> None:
    changes_page = await socket("/ws/ui/?changes=1")
    snapshot = await changes_page.next()
    assert 'id="change-refresh"' in snapshot

    await changes_changed_publish(execution_id="exe-1", session_id=None)

    frame = await changes_page.until(lambda frame: 'id="change-refresh"' in frame)
    assert 'hx-get="/ui/changes/list/"' in frame and 'hx-include="#change-filters"' in frame
