"""A turn reads what its request needs of its session: the latest summary and what follows it, once —
not every stored message, twice (the session's history grows; a turn's start must not with it)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agent.models import AgentSession, Message
from agent.selectors import session_context
from agent.store import sessions as session_store

pytestmark = pytest.mark.django_db


def _long_session(turns: int) -> tuple[AgentSession, int]:
    """A session of `turns` question/answer pairs, the older half summarised; (it, the summary's bound)."""
    session = AgentSession.objects.create(actor="operator:test", origin="test", title="long")
    ids = []
    for n in range(turns):
        for role, text in (("user", f"question {n}"), ("assistant", f"answer {n}")):
            ids.append(Message.objects.create(session=session, role=role, content=[{"type": "text", "text": text}]).pk)
    bound = ids[turns - 1]
    Message.objects.create(
        session=session,
        role="user",
        kind=Message.Kind.SUMMARY,
        replaces_through=bound,
        content=[{"type": "text", "text": "Summary of the earlier conversation: questions 0 to half."}],
    )
    return session, bound


def test_a_turn_reads_the_session_once_from_its_latest_summary_on() -> None:
    session, bound = _long_session(100)
    whole = session_context(session).history()

    with CaptureQueriesContext(connection) as queries:
        begun = session_store.turn_begin(
            running=(),
            session_id=session.pk,
            actor="operator:test",
            origin="test",
            text="and now?",
            model="claude-sonnet-5",
        )

    reads = [q["sql"] for q in queries.captured_queries if q["sql"].lstrip().upper().startswith("SELECT")]
    message_reads = [sql for sql in reads if "agent_messages" in sql and "agent_search" not in sql]
    # The latest summary (one row), then the messages after what it replaces: nothing older.
    assert len(message_reads) == 2, message_reads
    assert any("LIMIT 1" in sql for sql in message_reads)
    assert any(f"> {bound}" in sql for sql in message_reads), message_reads
    # The model is sent the same conversation as from every message, the question last.
    assert begun.history == [*whole, ("user", [{"type": "text", "text": "and now?"}])]
