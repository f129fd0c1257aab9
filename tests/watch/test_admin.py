"""The watch models in the admin: searchable, filterable, readable, and nothing editable."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from agent.models import AgentSession
from watch.models import Investigation, WatchedEvent

pytestmark = pytest.mark.django_db

HOSTILE = "<script>alert(1)</script> disk full"


@pytest.fixture
def investigations() -> tuple[Investigation, Investigation]:
    session = AgentSession.objects.create(actor="agent:hermes", origin="signal", title="postgres")
    postgres = Investigation.objects.create(
        session=session,
        entity="service:postgres",
        kind="wal_archive_failing",
        severity="critical",
        title=f"critical: wal_archive_failing on service:postgres — {HOSTILE}",
        first_event_id="7",
        event={"id": "7", "type": "signal.fired", "data": {"summary": HOSTILE}},
        escalation={"summary": "archive_command fails", "impact": "service:authentik"},
    )
    sonarr = Investigation.objects.create(
        entity="service:sonarr",
        kind="http_timeout",
        title="warning: http_timeout on service:sonarr",
        state=Investigation.State.SKIPPED,
        skipped_reason="budget",
        first_event_id="8",
    )
    WatchedEvent.objects.create(
        event_id="7", seq=7, type="signal.fired", outcome="opened", investigation=postgres, data={"x": HOSTILE}
    )
    WatchedEvent.objects.create(event_id="9", seq=9, type="signal.fired", outcome="suppressed", investigation=postgres)
    WatchedEvent.objects.create(event_id="8", seq=8, type="signal.fired", outcome="skipped", investigation=sonarr)
    WatchedEvent.objects.create(event_id="3", seq=3, type="approval.created", outcome="backlog")
    return postgres, sonarr


def _rows(page: str) -> str:
    start = page.index('id="result_list"')
    return page[start : page.index("</table>", start)]


def test_investigations_filter_by_state_and_reason_and_search_by_entity(
    auditor: Client, investigations: tuple[Investigation, Investigation]
) -> None:
    url = reverse("admin:watch_investigation_changelist")
    skipped = _rows(auditor.get(url, {"state": "skipped"}).content.decode())
    assert "service:sonarr" in skipped and "budget" in skipped and "service:postgres" not in skipped
    found = _rows(auditor.get(url, {"q": "postgres"}).content.decode())
    assert "wal_archive_failing" in found and "service:sonarr" not in found


def test_an_investigation_reads_with_its_escalation_events_and_session(
    auditor: Client, investigations: tuple[Investigation, Investigation]
) -> None:
    postgres, _ = investigations
    page = auditor.get(reverse("admin:watch_investigation_change", args=[postgres.pk])).content.decode()

    assert "archive_command fails" in page and "service:authentik" in page
    assert f'href="/ui/s/{postgres.session_id}/"' in page
    # The events counted on it, by id and outcome.
    inline = page[page.index('id="events-group"') :]
    assert "<p>9</p>" in inline and "Suppressed" in inline and "<p>8</p>" not in inline
    assert "<script>alert(1)" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_events_filter_by_outcome(auditor: Client, investigations: tuple[Investigation, Investigation]) -> None:
    url = reverse("admin:watch_watchedevent_changelist")
    backlog = _rows(auditor.get(url, {"outcome": "backlog"}).content.decode())
    assert "approval.created" in backlog and "signal.fired" not in backlog


def test_nothing_can_be_added_changed_or_deleted(
    auditor: Client, investigations: tuple[Investigation, Investigation]
) -> None:
    postgres, _ = investigations
    assert auditor.get(reverse("admin:watch_investigation_add")).status_code == 403
    change = reverse("admin:watch_investigation_change", args=[postgres.pk])
    assert auditor.post(change, {"state": "resolved"}).status_code == 403
    event = WatchedEvent.objects.get(event_id="7")
    assert auditor.post(reverse("admin:watch_watchedevent_delete", args=[event.pk]), {"post": "yes"}).status_code == 403
    assert Investigation.objects.get(pk=postgres.pk).state == "open" and WatchedEvent.objects.count() == 4
