"""A long session and a long ledger open a page at a time: the latest turns with a way back to the
earlier ones, and ledger pages that follow one another under the same filters."""

from __future__ import annotations

import datetime
import re
import uuid

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone

from agent.models import Activity, AgentSession, Message, Turn
from agent.store import ledger
from controlroom import selectors
from transcript import selectors as transcript_selectors

pytestmark = pytest.mark.django_db


def session_with_turns(count: int) -> tuple[AgentSession, list[uuid.UUID]]:
    """A session of `count` answered questions ("question 0" first), a minute apart."""
    session = AgentSession.objects.create(actor="operator:test", title="a long one")
    start = timezone.now() - datetime.timedelta(days=1)
    turn_ids = []
    for index in range(count):
        turn = Turn.objects.create(session=session, actor="operator:test", status=Turn.Status.DONE)
        Turn.objects.filter(pk=turn.pk).update(started_at=start + datetime.timedelta(minutes=index))
        Message.objects.create(
            session=session, turn=turn, role="user", content=[{"type": "text", "text": f"question {index}"}]
        )
        Message.objects.create(
            session=session, turn=turn, role="assistant", content=[{"type": "text", "text": f"answer {index}"}]
        )
        turn_ids.append(turn.id)
    return session, turn_ids


def questions_in(html: str) -> list[int]:
    return [int(number) for number in re.findall(r"<p>question (\d+)</p>", html)]


def test_a_long_session_opens_on_its_latest_turns_and_links_to_the_earlier_ones(client: Client) -> None:
    shown = transcript_selectors.SESSION_TURNS_SHOWN
    session, turn_ids = session_with_turns(shown + 5)

    latest = client.get(f"/ui/s/{session.id}/").content.decode()
    assert questions_in(latest) == list(range(5, shown + 5))
    earlier_link = f'href="/ui/s/{session.id}/?before={turn_ids[5]}"'
    assert earlier_link in latest and "Earlier turns" in latest
    assert 'name="message"' in latest, "the latest turns keep the composer"

    earlier = client.get(f"/ui/s/{session.id}/?before={turn_ids[5]}").content.decode()
    assert questions_in(earlier) == [0, 1, 2, 3, 4]
    assert "Earlier turns" not in earlier, "these are the first turns"
    assert f'href="/ui/s/{session.id}/">Latest turns</a>' in earlier
    # History: its socket does not follow the session (whose snapshot would put the latest back),
    # and there is nothing to ask from here.
    assert f"session={session.id}" not in earlier and 'name="message"' not in earlier


def test_a_summary_ending_right_before_the_first_turn_shown_is_marked_there(client: Client) -> None:
    shown = transcript_selectors.SESSION_TURNS_SHOWN
    session, turn_ids = session_with_turns(shown + 5)
    through = Message.objects.filter(turn_id=turn_ids[4]).order_by("id").last()
    assert through is not None
    Message.objects.create(
        session=session,
        turn_id=turn_ids[5],
        role="user",
        kind=Message.Kind.SUMMARY,
        replaces_through=through.pk,
        content=[{"type": "text", "text": "The operator asked about caddy."}],
    )
    latest = client.get(f"/ui/s/{session.id}/").content.decode()
    assert latest.count("earlier turns summarised for the model") == 1
    assert latest.index("The operator asked about caddy.") < latest.index("<p>question 5</p>")
    earlier = client.get(f"/ui/s/{session.id}/?before={turn_ids[5]}").content.decode()
    assert "earlier turns summarised for the model" not in earlier


def test_a_short_session_shows_every_turn_without_an_earlier_link(client: Client) -> None:
    session, _turn_ids = session_with_turns(3)
    html = client.get(f"/ui/s/{session.id}/").content.decode()
    assert questions_in(html) == [0, 1, 2] and "Earlier turns" not in html


def test_a_malformed_turn_id_is_not_found_and_another_sessions_turn_shows_the_latest(client: Client) -> None:
    session, _turn_ids = session_with_turns(2)
    _other, other_turns = session_with_turns(1)
    assert client.get(f"/ui/s/{session.id}/?before=nope").status_code == 404
    assert questions_in(client.get(f"/ui/s/{session.id}/?before={other_turns[0]}").content.decode()) == [0, 1]


def test_the_drawer_on_other_pages_shows_fewer_turns_and_links_to_the_earlier_ones(client: Client) -> None:
    shown = selectors.DRAWER_TURNS_SHOWN
    session, turn_ids = session_with_turns(transcript_selectors.SESSION_TURNS_SHOWN + 1)
    client.get(f"/ui/s/{session.id}/")
    ledger = client.get("/ui/ledger/").content.decode()
    total = len(turn_ids)
    assert questions_in(ledger) == list(range(total - shown, total))
    assert f'href="/ui/s/{session.id}/?before={turn_ids[total - shown]}"' in ledger
    # Its socket is told how many turns the page drew, so its snapshot draws the same ones.
    assert f"session={session.id}&amp;turns={shown}" in ledger


def ledger_of(count: int, *, failing_every: int = 0) -> list[int]:
    """`count` tool calls a second apart (`tool_<n>`, oldest first); every `failing_every`th failed."""
    start = timezone.now() - datetime.timedelta(hours=1)
    turn = uuid.uuid4()
    for index in range(count):
        ledger.activity_record(
            call=ledger.LedgerCall(
                correlation_id=turn,
                session_id=None,
                actor="operator:test",
                tool_use_id=f"toolu_{index}",
                server="garra" if index % 2 else "oikos",
                tool=f"tool_{index}",
                arguments={},
                started_at=start + datetime.timedelta(seconds=index),
            ),
            result={"ok": True},
            is_error=bool(failing_every) and index % failing_every == 0,
            duration_ms=5,
        )
    return list(Activity.objects.order_by("started_at").values_list("id", flat=True))


def tools_in(html: str) -> list[int]:
    return [int(number) for number in re.findall(r'<span class="chip-tool">tool_(\d+)</span>', html)]


def link(html: str, label: str) -> str | None:
    found = re.search(rf'<a href="([^"]*)" rel="[a-z]+">{label}</a>', html)
    return found.group(1).replace("&amp;", "&") if found else None


def test_the_ledger_pages_older_and_newer_from_row_to_row(client: Client) -> None:
    ledger_of(120)
    first = client.get("/ui/ledger/").content.decode()
    assert tools_in(first) == list(range(119, 69, -1)) and link(first, "Newer") is None

    older = link(first, "Older")
    assert older is not None
    second = client.get(f"/ui/ledger/{older}").content.decode()
    assert tools_in(second) == list(range(69, 19, -1))
    third_link = link(second, "Older")
    assert third_link is not None
    third = client.get(f"/ui/ledger/{third_link}").content.decode()
    assert tools_in(third) == list(range(19, -1, -1)) and link(third, "Older") is None

    back = link(third, "Newer")
    assert back is not None
    assert tools_in(client.get(f"/ui/ledger/{back}").content.decode()) == list(range(69, 19, -1))


def test_the_ledger_pages_keep_their_filters(client: Client) -> None:
    ledger_of(240, failing_every=2)  # the failed calls are the even ones, all on oikos
    first = client.get("/ui/ledger/?only_errors=1&server=oikos").content.decode()
    assert tools_in(first) == list(range(238, 138, -2))
    older = link(first, "Older")
    assert older is not None and "only_errors=1" in older and "server=oikos" in older
    assert tools_in(client.get(f"/ui/ledger/{older}").content.decode()) == list(range(138, 38, -2))


def test_the_ledger_filter_menus_list_each_server_and_tool_once() -> None:
    ledger_of(6)
    assert selectors.ledger_choices() == {
        "servers": ["garra", "oikos"],
        "tools": [f"tool_{index}" for index in range(6)],
    }


def test_the_ledger_order_has_an_index_its_pages_seek_in() -> None:
    """Keyset pages are only as fast as an index on (started_at, id): the migration must create it."""
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, Activity._meta.db_table)
    assert any(c["index"] and c["columns"] == ["started_at", "id"] for c in constraints.values())
