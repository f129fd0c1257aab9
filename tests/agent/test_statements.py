"""The turn's hot writes (`common.statements`) store exactly what the ORM stores.

Each row is written twice, once through a statement and once through `Model.objects.create()` /
`QuerySet.update()` with the same values, and the two are compared column by column as the
database holds them (raw SQL, no ORM conversion on the way back): a UUID stored in another form, a
JSON value encoded differently or a secret left unredacted would make a row the rest of Hermes
cannot find or must not keep. Runs on whichever database the suite runs on (CI: PostgreSQL).
"""

from __future__ import annotations

import datetime
import uuid
from decimal import Decimal
from typing import Any

import pytest
from django.db import connection, models
from django.utils import timezone

from agent.models import Activity, AgentSession, Message, SearchEntry, Turn
from common.statements import Insert, Update

pytestmark = pytest.mark.django_db

SECRET = "sk-ant-statements-0123456789abcdef"
# Columns whose values differ between any two rows written at different moments.
MOMENTS = {"id", "created_at", "last_active_at", "started_at"}


def raw_row(model: type[models.Model], pk: Any) -> dict[str, Any]:
    """The row as the database holds it, by column name (the pk compared as the database stores it)."""
    table = model._meta.db_table
    pk_column = model._meta.pk.column
    stored_pk = model._meta.pk.get_db_prep_value(pk, connection)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT * FROM {connection.ops.quote_name(table)} WHERE {pk_column} = %s", [stored_pk])
        columns = [column[0] for column in cursor.description]
        [row] = cursor.fetchall()
    return dict(zip(columns, row, strict=True))


def without(row: dict[str, Any], columns: set[str]) -> dict[str, Any]:
    return {column: value for column, value in row.items() if column not in columns}


@pytest.fixture
def secret(settings: Any, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("STATEMENTS_TEST_SECRET", SECRET)
    settings.HERMES_REDACT = ["STATEMENTS_TEST_SECRET"]
    return SECRET


@pytest.fixture
def session() -> AgentSession:
    return AgentSession.objects.create(actor="operator:test", origin="cli", title="caddy")


@pytest.fixture
def turn(session: AgentSession) -> Turn:
    return Turn.objects.create(session=session, actor="operator:test")


class TestInsert:
    def test_a_session_with_a_made_uuid_and_defaults_is_stored_as_create_stores_it(self) -> None:
        # Its creation moments are not given: they take the time of the insert, as `save()` does.
        values = {"actor": "operator:test", "origin": "api", "title": "what is degraded?", "model": ""}
        with connection.cursor() as cursor:
            pk = Insert(AgentSession, list(values)).run(cursor, **values)
        by_orm = AgentSession.objects.create(**values)

        assert isinstance(pk, uuid.UUID)
        ours, theirs = raw_row(AgentSession, pk), raw_row(AgentSession, by_orm.pk)
        assert without(ours, MOMENTS) == without(theirs, MOMENTS)
        stored = AgentSession.objects.get(pk=pk)
        assert abs(stored.created_at - timezone.now()) < datetime.timedelta(seconds=5)
        assert stored.last_active_at == stored.created_at

    def test_a_message_gets_its_id_from_the_database_its_given_moment_and_its_content_redacted(
        self, session: AgentSession, turn: Turn, secret: str
    ) -> None:
        content = [{"type": "text", "text": f"the key is {secret}"}, {"type": "tool_use", "id": "t1", "input": {}}]
        now = timezone.now()
        values = {"session_id": session.pk, "turn_id": turn.pk, "role": "user", "content": content, "created_at": now}
        with connection.cursor() as cursor:
            first = Insert(Message, list(values)).run(cursor, **values)
            second = Insert(Message, list(values)).run(cursor, **values)
        by_orm = Message.objects.create(**values)  # `created_at` is the moment of `save()` here

        assert isinstance(first, int) and second == first + 1
        assert without(raw_row(Message, first), MOMENTS) == without(raw_row(Message, by_orm.pk), MOMENTS)
        stored = Message.objects.get(pk=first)
        assert secret not in str(stored.content) and "[REDACTED]" in stored.content[0]["text"]
        assert stored.created_at == now and stored.kind == "" and stored.replaces_through is None

    def test_a_ledger_row_and_its_search_entry_match_the_orm_s(self, session: AgentSession, turn: Turn) -> None:
        row = {
            "correlation_id": turn.pk,
            "session_id": session.pk,
            "actor": "operator:test",
            "tool_use_id": "toolu_1",
            "server": "oikos",
            "tool": "get_blast_radius",
            "arguments": {"slug": "service:postgres", "depth": 3},
            "result": {"content": [{"type": "text", "text": "11 dependants"}]},
            "state": Activity.State.OK,
            "is_error": False,
            "duration_ms": 7,
            "started_at": timezone.now(),
        }
        with connection.cursor() as cursor:
            pk = Insert(Activity, list(row)).run(cursor, **row)
        by_orm = Activity.objects.create(**row)
        assert without(raw_row(Activity, pk), {"id"}) == without(raw_row(Activity, by_orm.pk), {"id"})

        entry = {
            "session_id": session.pk,
            "turn_id": turn.pk,
            "message_id": None,
            "activity_id": pk,
            "kind": SearchEntry.Kind.TOOL,
            "server": "oikos",
            "tool": "get_blast_radius",
            "tool_use_id": "toolu_1",
            "text": "get_blast_radius\n{}",
            "created_at": row["started_at"],
        }
        with connection.cursor() as cursor:
            entry_pk = Insert(SearchEntry, list(entry)).run(cursor, **entry)
        entry_by_orm = SearchEntry.objects.create(**entry)
        assert without(raw_row(SearchEntry, entry_pk), {"id"}) == without(raw_row(SearchEntry, entry_by_orm.pk), {"id"})

    def test_a_column_the_model_does_not_have_is_refused_when_the_statement_is_made(self) -> None:
        with pytest.raises(ValueError, match="Message has no column session"):
            Insert(Message, ["session", "role"])


class TestUpdate:
    def test_it_sets_what_update_sets_and_only_where_the_row_matches(self, session: AgentSession) -> None:
        ours, theirs, other = (Turn.objects.create(session=session, actor="operator:test") for _ in range(3))
        interrupted = Turn.objects.create(session=session, actor="operator:test", status=Turn.Status.INTERRUPTED)
        end = {
            "status": Turn.Status.DONE,
            "stop_reason": "end_turn",
            "iterations": 3,
            "usage": {"input_tokens": 5000, "output_tokens": 120},
            "error": "",
            "finished_at": timezone.now(),
            "tokens_total": 5120,
            "cost_usd": Decimal("0.016800"),
        }
        statement = Update(Turn, list(end), where=["id", "status"])
        with connection.cursor() as cursor:
            changed = statement.run(cursor, where=[ours.pk, Turn.Status.RUNNING], **end)
            unchanged = statement.run(cursor, where=[interrupted.pk, Turn.Status.RUNNING], **end)
        Turn.objects.filter(pk=theirs.pk, status=Turn.Status.RUNNING).update(**end)

        assert (changed, unchanged) == (1, 0)
        assert without(raw_row(Turn, ours.pk), MOMENTS) == without(raw_row(Turn, theirs.pk), MOMENTS)
        assert Turn.objects.get(pk=other.pk).status == Turn.Status.RUNNING
        assert Turn.objects.get(pk=interrupted.pk).status == Turn.Status.INTERRUPTED

    def test_appended_text_goes_at_the_end_of_the_column_redacted(
        self, session: AgentSession, turn: Turn, secret: str
    ) -> None:
        entry = SearchEntry.objects.create(
            session=session, turn_id=turn.pk, activity_id=41, kind="tool", text="tail_log", created_at=timezone.now()
        )
        with connection.cursor() as cursor:
            changed = Update(SearchEntry, appended=["text"], where=["activity_id"]).run(
                cursor, where=[41], text=f"\nlogin with {secret}"
            )
        assert changed == 1
        assert SearchEntry.objects.get(pk=entry.pk).text == "tail_log\nlogin with [REDACTED]"

    def test_an_update_that_sets_nothing_is_refused(self) -> None:
        with pytest.raises(ValueError, match="sets at least one column"):
            Update(Turn, where=["id"])
