"""What a peer can make Hermes store: nothing when refused, a bounded amount when accepted, and never
a configured secret, whichever write path stores it."""

from __future__ import annotations

import importlib
import uuid

import pytest
from a2a.types import Message, Part, Role, Task, TaskState, TaskStatus
from channels.db import database_sync_to_async
from django.apps import apps
from django.db import connection
from pytest_django.fixtures import Settings

from agent.models import Activity
from interop.models import A2ATask, PeerConversation, PeerExchange
from interop.server.conversation import InboundRejected, inbound_turn
from interop.server.task_store import task_save
from interop.services import exchange_finish, inbound_exchange_begin

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "hermes-test-secret-5b1f0c9e7d"


@pytest.fixture
def configured_secret(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("STORAGE_TEST_SECRET", SECRET)
    settings.HERMES_REDACT = ["STORAGE_TEST_SECRET"]
    return SECRET


def _raw(sql: str) -> str:
    """What the database itself holds, read past the ORM."""
    with connection.cursor() as cursor:
        cursor.execute(sql)
        return repr(cursor.fetchall())


def test_create_save_and_update_all_store_secrets_redacted(configured_secret: str) -> None:
    row = Activity.objects.create(
        correlation_id=uuid.uuid4(),
        actor="operator:test",
        server="oikos",
        tool="echo",
        arguments={"text": f"token {configured_secret}", "nested": [{"deep": configured_secret}]},
        started_at="2026-11-30T10:00:00Z",
    )
    Activity.objects.filter(pk=row.pk).update(result={"content": [{"type": "text", "text": configured_secret}]})
    exchange = PeerExchange.objects.create(peer="lab", direction="inbound", message=f"pasted {configured_secret}")
    exchange.reply = f"echoed {configured_secret}"
    exchange.save()

    stored = _raw("SELECT arguments, result FROM agent_activity") + _raw(
        "SELECT message, reply FROM interop_peer_exchanges"
    )
    assert configured_secret not in stored
    assert stored.count("[REDACTED]") == 5
    assert Activity.objects.get().arguments["text"] == "token [REDACTED]"


async def test_a_peer_message_whose_turn_cannot_start_leaves_nothing(
    settings: Settings, configured_secret: str
) -> None:
    settings.ANTHROPIC_API_KEY = ""
    settings.ANTHROPIC_BASE_URL = ""
    with pytest.raises(InboundRejected) as rejected:
        await inbound_turn(peer="lab", dialect="garraia", external_id="t-1", text=f"hello {configured_secret}")

    assert rejected.value.code == "llm_not_configured"
    counts = await database_sync_to_async(lambda: (PeerExchange.objects.count(), PeerConversation.objects.count()))()
    assert counts == (0, 0)


def _inbound(peer: str, external_id: str, keep: int) -> int:
    # A rate limit below `keep` (the bound never goes under it), over a window too short to refuse.
    begun = inbound_exchange_begin(
        peer=peer,
        dialect="garraia",
        external_id=external_id,
        message=f"message {external_id}",
        max_turns=5,
        rate_limit=30,
        window=1e-6,
        starting_grace=30.0,
        keep=keep,
    )
    exchange_finish(exchange_id=begun.exchange_id, reply="ok", state="completed")
    return begun.exchange_id


def test_a_peer_keeps_only_its_newest_exchanges_and_the_conversations_they_belong_to() -> None:
    first = [_inbound("chatty", f"c-{n}", keep=1000) for n in range(60)]
    _inbound("quiet", "q-1", keep=50)

    _inbound("chatty", "c-60", keep=50)

    kept = set(PeerExchange.objects.filter(peer="chatty").values_list("pk", flat=True))
    assert len(kept) == 50
    assert not kept & set(first[:11]), "the oldest went first"
    assert PeerConversation.objects.filter(peer="chatty").count() == 50
    assert PeerExchange.objects.filter(peer="quiet").count() == 1, "another peer's rows are not touched"


def test_the_bound_never_cuts_into_the_rate_window() -> None:
    """`keep` below the rate limit would let pruning hide rows the window counts."""
    for n in range(60):
        _inbound("fast", f"f-{n}", keep=1000)
    begun = inbound_exchange_begin(
        peer="fast",
        dialect="garraia",
        external_id="f-last",
        message="last",
        max_turns=5,
        rate_limit=100,
        window=3600.0,
        starting_grace=30.0,
        keep=50,
    )
    assert begun.exchange_id
    assert PeerExchange.objects.filter(peer="fast", direction="inbound").count() == 61


def _task(task_id: str, state: TaskState) -> Task:
    task = Task(id=task_id, context_id="ctx", status=TaskStatus(state=state))
    task.history.append(Message(role=Role.ROLE_USER, message_id=uuid.uuid4().hex, parts=[Part(text=SECRET)]))
    return task


def test_a_peer_keeps_only_its_newest_tasks_and_never_loses_a_live_one(
    settings: Settings, configured_secret: str
) -> None:
    settings.HERMES_A2A_PEER_KEEP = 3
    task_save(task=_task("live-0", TaskState.TASK_STATE_WORKING), owner="lab", prev_version=0)
    for n in range(5):
        task_save(task=_task(f"done-{n}", TaskState.TASK_STATE_COMPLETED), owner="lab", prev_version=0)
    task_save(task=_task("other-0", TaskState.TASK_STATE_COMPLETED), owner="other", prev_version=0)

    kept = set(A2ATask.objects.filter(owner="lab").values_list("id", flat=True))
    assert kept == {"live-0", "done-2", "done-3", "done-4"}, "the newest 3, and the live one however old"
    assert A2ATask.objects.filter(owner="other").count() == 1
    assert configured_secret not in _raw("SELECT data FROM interop_a2a_tasks")


def test_the_migration_redacts_what_earlier_versions_stored_raw(configured_secret: str) -> None:
    with connection.cursor() as cursor:  # past the redacting fields, as an earlier Hermes wrote it
        cursor.execute(
            "INSERT INTO interop_peer_exchanges (peer, direction, message, reply, state, error, started_at,"
            " duration_ms) VALUES (%s, 'inbound', %s, 'plain reply', 'completed', '', %s, 0)",
            ["lab", f"pasted {configured_secret}", "2026-11-30 10:00:00"],
        )
    assert configured_secret in _raw("SELECT message FROM interop_peer_exchanges")
    migration = importlib.import_module("interop.migrations.0003_redact_stored")

    migration.stored_secrets_redact(apps, None)

    assert _raw("SELECT message, reply FROM interop_peer_exchanges") == repr([("pasted [REDACTED]", "plain reply")])
