"""The investigations page, and investigations announcing themselves on open control rooms."""

from __future__ import annotations

import html
import re

import pytest
from channels.db import database_sync_to_async
from django.test import Client

from agent.models import Message, Turn
from tests.controlroom.conftest import Connect
from watch import services
from watch.models import Investigation
from watch.policy import TriggerPolicy

pytestmark = pytest.mark.django_db(transaction=True)

# Every firing here is an incident of its own, though all are stamped with the same time.
POLICY = TriggerPolicy(
    kinds=frozenset({"signal.fired", "entity.health_changed"}),
    min_severity="warning",
    hourly_cap=1000,
    incident_window_seconds=0,
)
HOSTILE = '<img src=x onerror="alert(1)"> disk full'
_numbers = iter(range(1, 1_000_000))


def _fire(entity: str, kind: str = "disk_full", summary: str = "disk full", severity: str = "warning") -> Investigation:
    """A `signal.fired` claimed as a watcher claims it: the investigation it opens (or counts on)."""
    claim = services.event_claim(
        event_id=str(next(_numbers)),
        event_type="signal.fired",
        at="2026-12-01T03:12:00Z",
        data={"slug": entity, "kind": kind, "severity": severity, "summary": summary},
        policy=POLICY,
    )
    assert claim is not None and claim.investigation_id is not None
    return Investigation.objects.get(pk=claim.investigation_id)


def _resolve(entity: str, kind: str) -> None:
    services.event_claim(
        event_id=str(next(_numbers)),
        event_type="signal.resolved",
        at="2026-12-01T03:20:00Z",
        data={"slug": entity, "kind": kind},
        policy=POLICY,
    )


def _rows(page: str) -> list[str]:
    return re.findall(r'<tr class="investigation-row[^"]*">(.*?)</tr>', page, re.S)


def test_the_page_lists_open_resolved_and_skipped_investigations_each_linking_to_its_session(client: Client) -> None:
    sonarr = _fire("service:sonarr", "http_timeout", "indexer timed out")
    _fire("service:sonarr", "http_timeout", "indexer timed out")  # again, within the cooldown: fired x2
    caddy = _fire("service:caddy", "cert_expiring", "cert expires in 3 days")
    _resolve("service:caddy", "cert_expiring")
    postgres = _fire("service:postgres", "wal_archive_failing", HOSTILE, "critical")
    services.investigation_skip(investigation_id=postgres.pk, reason="budget")
    services.investigation_escalate(investigation_id=sonarr.pk, escalation={"summary": "sonarr's indexer is slow"})

    page = client.get("/ui/investigations/").content.decode()

    assert 'aria-current="page">Investigations</a>' in page
    rows = _rows(page)
    assert len(rows) == 3
    newest, resolved, open_ = rows  # newest first
    assert "skipped: budget" in newest and "no model call" in newest
    assert "resolved" in resolved and f'href="/ui/s/{caddy.session_id}/"' in resolved
    assert "open" in open_ and "\N{MULTIPLICATION SIGN}2" in open_ and "sonarr&#x27;s indexer is slow" in open_
    assert f'href="/ui/s/{sonarr.session_id}/"' in open_
    # Event text is shown as text, never as markup.
    assert "<img src=x" not in page and html.escape(HOSTILE) in page
    # The page follows new investigations over its socket.
    assert 'ws-connect="/ws/ui/?investigations=1"' in page


def test_the_page_filters_by_entity_state_and_kind(client: Client) -> None:
    _fire("service:sonarr", "http_timeout")
    _fire("service:sonarr", "disk_full")
    _fire("service:caddy", "http_timeout")
    _resolve("service:sonarr", "disk_full")

    def titles(**query: str) -> list[str]:
        page = client.get("/ui/investigations/", query).content.decode()
        return [re.sub(r"<[^>]+>", "", row).split("\n")[2].strip() for row in _rows(page)]

    by_entity = titles(entity="service:sonarr")
    assert len(by_entity) == 2 and all("service:sonarr" in title for title in by_entity)
    assert titles(entity="service:sonarr", state="open") == [by_entity[1]]
    assert titles(kind="http_timeout", state="open") == [
        "warning: http_timeout on service:caddy — disk full",
        "warning: http_timeout on service:sonarr — disk full",
    ]
    assert "No investigation matches." in client.get("/ui/investigations/", {"state": "skipped"}).content.decode()
    # A filter that is not one is said, and ignored.
    refused = client.get("/ui/investigations/", {"state": "<b>"}).content.decode()
    assert "were not valid" in refused and len(_rows(refused)) == 3


def test_the_page_is_paginated_and_its_pages_keep_the_filters(client: Client) -> None:
    for number in range(55):
        _fire(f"service:s{number}", "http_timeout")

    first = client.get("/ui/investigations/", {"kind": "http_timeout"}).content.decode()
    second = client.get("/ui/investigations/", {"kind": "http_timeout", "page": "2"}).content.decode()

    assert len(_rows(first)) == 50 and len(_rows(second)) == 5
    assert "page 1 of 2" in first and 'href="/ui/investigations/?kind=http_timeout&amp;page=2"' in first
    assert "service:s0 " in second  # the oldest are on the last page


def test_every_page_links_to_the_investigations(client: Client) -> None:
    for path in ("/ui/", "/ui/ledger/", "/ui/sessions/"):
        assert 'href="/ui/investigations/"' in client.get(path).content.decode()


async def test_a_new_investigation_announces_itself_on_every_open_page(socket: Connect) -> None:
    sessions_page = await socket("/ws/ui/?sessions=1")
    investigations_page = await socket("/ws/ui/?investigations=1")
    ledger_page = await socket("/ws/ui/")
    for frames in (sessions_page, investigations_page, ledger_page):
        await frames.next()  # the snapshot
    # The feed has taken note of what exists when the pages opened: only what comes next is news.
    opened = await database_sync_to_async(_fire)("service:postgres", "wal_archive_failing", HOSTILE, "critical")

    announced = [
        await frames.until(lambda frame: "Hermes opened an investigation" in frame)
        for frames in (sessions_page, investigations_page, ledger_page)
    ]

    for frame in announced:
        assert 'hx-swap-oob="afterbegin:#notices"' in frame
        assert f'<a href="/ui/s/{opened.session_id}/">' in frame
        assert html.escape(HOSTILE) in frame and "<img" not in frame
    assert 'id="session-refresh"' in announced[0] and 'id="investigation-refresh"' not in announced[0]
    assert 'id="investigation-refresh"' in announced[1] and 'hx-include="#investigation-filters"' in announced[1]
    assert 'id="session-refresh"' not in announced[2] and 'id="investigation-refresh"' not in announced[2]


async def test_the_escalation_card_of_an_open_session_is_redrawn_when_the_escalation_is_stored(
    socket: Connect,
) -> None:
    investigation = await database_sync_to_async(_fire)("service:sonarr", "http_timeout")
    page = await socket(f"/ws/ui/?session={investigation.session_id}")
    await page.next()

    # The watcher, another process, ran the turn: with the in-memory layer, none of it came live.
    turn_id = await database_sync_to_async(_turn_stored)(investigation, "The indexer answers in 40 s.")
    await database_sync_to_async(services.investigation_escalate)(
        investigation_id=investigation.pk, escalation={"summary": "the indexer <b>is</b> slow", "evidence": []}
    )
    frame = await page.until(lambda frame: 'id="escalation-card"' in frame)
    drawn = await page.until(lambda frame: str(turn_id) in frame)

    assert 'hx-swap-oob="true"' in frame and "the indexer &lt;b&gt;is&lt;/b&gt; slow" in frame
    assert "Hermes opened an investigation" not in frame  # a change, not a new one
    # The finished turn is drawn from the database, the answer with it.
    assert 'hx-swap-oob="beforeend:#transcript"' in drawn and "The indexer answers in 40 s." in drawn


def _turn_stored(investigation: Investigation, answer: str) -> str:
    session_id = investigation.session_id
    assert session_id is not None
    turn = Turn.objects.create(session_id=session_id, actor="agent:hermes", status="done")
    Message.objects.create(session_id=session_id, turn=turn, role="user", content=[{"type": "text", "text": "brief"}])
    Message.objects.create(
        session_id=session_id, turn=turn, role="assistant", content=[{"type": "text", "text": answer}]
    )
    return str(turn.pk)


async def test_only_what_happens_after_a_page_opened_is_announced_and_a_repeat_only_refreshes_the_list(
    socket: Connect,
) -> None:
    await database_sync_to_async(_fire)("service:sonarr", "http_timeout", "already known")
    page = await socket("/ws/ui/?investigations=1")
    await page.next()

    await database_sync_to_async(_fire)("service:caddy", "cert_expiring", "brand new")
    announced = await page.until(lambda frame: "Hermes opened an investigation" in frame)
    # The sonarr signal again, within the cooldown: counted on its investigation (x2), nothing new.
    await database_sync_to_async(_fire)("service:sonarr", "http_timeout", "already known")
    refreshed = await page.until(lambda frame: 'id="investigation-refresh"' in frame)

    assert "service:caddy" in announced and "service:sonarr" not in announced
    assert "Hermes opened an investigation" not in refreshed
