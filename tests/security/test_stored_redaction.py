"""Nothing raw stored: every column that holds outside text redacts on write, JSON keys included.

The inventory holds every text, char and JSON column of every model to one of two things: it is a
redacting field (`agent.fields`), or it is named below with the reason it cannot hold outside text.
A column added without either fails here. Then a configured secret inside an Oikos signal's text
is followed from the simulator through the watcher and an investigation into every table and onto
every page that shows it.
"""

from __future__ import annotations

import asyncio
import importlib
import uuid
from collections.abc import AsyncGenerator
from typing import Any, cast

import pytest
from channels.db import database_sync_to_async
from django.apps import apps
from django.db import connection, models
from django.test import AsyncClient
from pytest_django.fixtures import Settings

from agent.fields import RedactedCharField, RedactedJSONField, RedactedTextField
from agent.models import AgentSession
from agent.tools import ToolHub
from common.redaction import REDACTED, redact_value
from oikos.client import OikosClient, OikosEvent
from oikos_sim.pulse import signal_fire
from oikos_sim.server import RunningSim
from tests.fakes import FakeAnthropic
from tests.fakes.scripted_models import DegradedInvestigator
from watch.models import Investigation, WatchedEvent
from watch.policy import TriggerPolicy
from watch.services import Claim
from watch.watcher import Watcher

SECRET = "hermes-stored-secret-7c41e9a0d2"

REDACTING = (RedactedCharField, RedactedTextField, RedactedJSONField)

# Django's own apps: users, permissions, content types and browser sessions are Hermes's and
# Django's bookkeeping. The admin's log keeps `str()` of an edited row (its redacted title) and the
# names of the fields changed.
NOT_OUTSIDE_TEXT_APPS = {"auth", "contenttypes", "sessions", "admin"}

# "app.Model.column": why it cannot hold text from outside Hermes.
# JSON columns of tables created after keys were redacted: no row of theirs was ever stored raw.
BORN_REDACTING = {
    "agent.Proposal.arguments",
    "agent.Proposal.sources",
    "agent.Proposal.outcome",
    "agent.Change.params",
    # Notes and what a turn was given of them (agent/migrations/0016_notes.py): redacting from the start.
    "agent.Turn.notes_given",
    "agent.Note.entities",
    "agent.Note.tags",
    "agent.NoteProposal.entities",
    "agent.NoteProposal.tags",
    "evals.EvalResult.checks",
    "evals.EvalResult.judged",
}

NOT_OUTSIDE_TEXT = {
    "agent.AgentSession.actor": "an identity Hermes resolved (operator, agent:hermes, peer:<configured name>)",
    "agent.AgentSession.origin": "one of Hermes's own origin names (cli, api, ui, mcp, a2a, signal)",
    "agent.AgentSession.model": "a model name checked against the configured models",
    "agent.Instance.role": "the process's role, set by Hermes",
    "agent.Instance.host": "this host's name and boot id",
    "agent.Instance.pid_started": "the process's start time read from the kernel",
    "agent.Turn.actor": "an identity Hermes resolved",
    "agent.Turn.status": "a Turn.Status choice",
    "agent.Turn.stop_reason": "one of the engine's stop reasons",
    "agent.Turn.model": "a model name checked against the configured models",
    "agent.Turn.usage": "token counts (integers) from the model API",
    "agent.Message.role": "a Message.Role choice",
    "agent.Message.kind": "a Message.Kind choice",
    "agent.Activity.actor": "an identity Hermes resolved",
    "agent.Activity.tool_use_id": "the model API's id for the call",
    "agent.Activity.server": "a configured MCP server's name",
    "agent.Activity.tool": "a tool name the hub matched against its catalog",
    "agent.Activity.state": "an Activity.State choice",
    "agent.ToolCatalog.server": "a configured MCP server's name",
    "agent.Elicitation.actor": "an identity Hermes resolved",
    "agent.Elicitation.tool_use_id": "the model API's id for the call",
    "agent.Elicitation.server": "a configured MCP server's name",
    "agent.Elicitation.tool": "a tool name the hub matched against its catalog",
    "agent.Elicitation.status": "an Elicitation.Status choice",
    "agent.Elicitation.answered_by": "an identity Hermes resolved",
    "agent.Elicitation.purpose": "form or confirmation, set by Hermes",
    "agent.Proposal.proposed_by": "an identity Hermes resolved (agent:hermes, peer:<configured name>)",
    "agent.Proposal.origin": "one of Hermes's own origin names",
    "agent.Proposal.tool_use_id": "the model API's id for the call",
    "agent.Proposal.server": "a configured MCP server's name",
    "agent.Proposal.tool": "a tool name the hub matched against its catalog",
    "agent.Proposal.status": "a Proposal.Status choice",
    "agent.Proposal.decided_by": "an identity Hermes resolved",
    "agent.McpCredential.server": "a configured MCP server's name",
    "agent.McpCredential.server_url": "the configured server URL the credentials are bound to",
    "agent.McpCredential.grant": "one of the OAuth grants Hermes implements",
    "agent.McpCredential.client_sealed": "Fernet ciphertext (agent.tools.oauth.sealing): never readable text",
    "agent.McpCredential.tokens_sealed": "Fernet ciphertext (agent.tools.oauth.sealing): never readable text",
    "agent.McpCredential.connected_by": "an identity Hermes resolved",
    "agent.McpAuthorization.server": "a configured MCP server's name",
    "agent.McpAuthorization.state_digest": "a SHA-256 hex digest Hermes computed",
    "agent.McpAuthorization.started_by": "an identity Hermes resolved",
    "agent.McpAuthorization.status": "a McpAuthorization.Status choice",
    "agent.SearchEntry.kind": "a SearchEntry.Kind choice",
    "agent.SearchEntry.server": "a configured MCP server's name",
    "agent.SearchEntry.tool": "a tool name the hub matched against its catalog",
    "agent.SearchEntry.tool_use_id": "the model API's id for the call",
    "interop.PairingToken.peer": "a configured peer's name",
    "interop.PairingToken.key_id": "a key id Hermes generated",
    "interop.PairingToken.digest": "a digest Hermes computed",
    "interop.PeerConversation.peer": "a configured peer's name",
    "interop.PeerConversation.dialect": "a PeerConversation.Dialect choice",
    "interop.PeerConversation.direction": "a PeerConversation.Direction choice",
    "interop.PeerConversation.status": "a PeerConversation.Status choice",
    "interop.PeerConversation.stop_reason": "one of Hermes's stop reasons",
    "interop.PeerExchange.peer": "a configured peer's name",
    "interop.PeerExchange.direction": "a PeerConversation.Direction choice",
    "interop.PeerExchange.state": "a task state Hermes recorded",
    "interop.A2ATask.id": "a task id the A2A server side generates",
    "interop.A2ATask.owner": "a configured peer's name",
    "interop.A2ATask.state": "a TaskState name",
    "oikos.ApprovalDecision.approval_id": "Oikos's approval id, a key Hermes looks up",
    "agent.Note.author": "an identity Hermes resolved (the signed-in operator, or the API's caller)",
    "agent.Note.updated_by": "an identity Hermes resolved",
    "agent.NoteProposal.tool_use_id": "the model API's id for the remember call",
    "agent.NoteProposal.proposed_by": "an identity Hermes resolved (the turn's actor)",
    "agent.NoteProposal.status": "a NoteProposal.Status choice",
    "agent.NoteProposal.decided_by": "an identity Hermes resolved (the operator who clicked)",
    "evals.EvalRun.model_names": "model names an operator typed on the command line",
    "evals.EvalRun.judge_model": "a model name an operator typed on the command line",
    "evals.EvalRun.tags": "case tags, checked against the case schema's tag pattern",
    "evals.EvalRun.case_ids": "case ids, checked against the case files' names",
    "evals.EvalRun.label": "a label an operator typed on the command line",
    "evals.EvalRun.by": "an identity Hermes resolved (operator, ci)",
    "evals.EvalRun.version": "Hermes's version from pyproject.toml",
    "evals.EvalRun.status": "an EvalRun.Status choice",
    "evals.EvalResult.case_id": "a case id, a case file's name",
    "evals.EvalResult.case_digest": "a SHA-256 hex digest Hermes computed",
    "evals.EvalResult.case_tags": "case tags, checked against the case schema's tag pattern",
    "evals.EvalResult.model": "a model name an operator typed on the command line",
    "evals.EvalResult.failures": "failure codes Hermes sets (evals/checks.py)",
    "agent.Change.execution_id": "Oikos's execution id, the record's key",
    "agent.Change.approval_id": "Oikos's approval id",
    "agent.Change.asked_by": "an identity Hermes resolved (the turn's actor, or the proposal's)",
    "agent.Change.followup": "a Change.FollowUp choice",
    "agent.Change.verdict": "a Change.Verdict choice",
    "oikos.ApprovalDecision.execution_id": "Oikos's execution id",
    "oikos.ApprovalDecision.decision": "an ApprovalDecision.Decision choice",
    "oikos.ApprovalDecision.operator": "an identity Hermes resolved",
    "oikos.ApprovalDecision.outcome": "an ApprovalDecision.Outcome choice",
    "oikos.TargetContext.target": "an Oikos entity slug, the cache key",
    "watch.Investigation.state": "an Investigation.State choice",
    "watch.Investigation.recalled": "ids and counts of the earlier investigations its brief recalled",
    "watch.Investigation.skipped_reason": "one of Hermes's skip reasons",
    "watch.Investigation.first_event_id": "Oikos's event id (the SSE id)",
    "watch.WatchedEvent.event_id": "Oikos's event id (the SSE id), the claim",
    "watch.WatchedEvent.type": "Oikos's event type name",
    "watch.WatchedEvent.at": "Oikos's timestamp",
    "watch.WatchedEvent.outcome": "a WatchedEvent.Outcome choice",
    "watch.Schedule.kind": "a Schedule.Kind choice",
    "watch.Schedule.cron": "a cron expression croniter accepted (watch/schedules.py cron_check)",
    "watch.Schedule.timezone": "an IANA time zone name zoneinfo knows",
    "watch.Schedule.matrix_room": "a Matrix room id",
    "watch.Schedule.model": "one of HERMES_MODELS",
    "watch.Schedule.owner": "an identity Hermes resolved",
    "watch.ScheduleRun.state": "a ScheduleRun.State choice",
    "watch.ScheduleRun.skipped_reason": "one of Hermes's skip reasons or a TurnRejected code",
    "watch.ScheduleRun.by": "an identity Hermes resolved",
    "matrix.MatrixSync.user_id": "the configured bot's Matrix id",
    "matrix.MatrixSync.next_batch": "the homeserver's sync token",
    "matrix.MatrixEvent.event_id": "a Matrix event id the homeserver assigned",
    "matrix.MatrixEvent.room_id": "a Matrix room id",
    "matrix.MatrixEvent.sender": "a Matrix user id the homeserver vouches for",
    "matrix.MatrixEvent.kind": "a MatrixEvent.Kind choice",
    "matrix.MatrixEvent.outcome": "one of the bridge's outcomes",
    "matrix.MatrixThread.room_id": "a Matrix room id",
    "matrix.MatrixThread.root_event_id": "a Matrix event id",
    "matrix.MatrixApprovalCard.approval_id": "Oikos's approval id",
    "matrix.MatrixApprovalCard.execution_id": "Oikos's execution id",
    "matrix.MatrixApprovalCard.event_id": "a Matrix event id",
    "matrix.MatrixApprovalCard.status": "one of the card's states",
    "matrix.MatrixApprovalCard.decided_by": "a Matrix user id or an identity Hermes resolved",
    "matrix.MatrixApprovalCard.decided_via": "matrix or elsewhere",
    "matrix.MatrixEscalation.room_id": "a Matrix room id",
    "matrix.MatrixEscalation.event_id": "a Matrix event id",
    "matrix.MatrixFollowUp.room_id": "a Matrix room id",
    "matrix.MatrixFollowUp.event_id": "a Matrix event id",
    "matrix.MatrixSchedulePost.room_id": "a Matrix room id (the schedule's, checked on save)",
    "matrix.MatrixSchedulePost.state": "a MatrixSchedulePost.State choice",
    "matrix.MatrixSchedulePost.event_id": "a Matrix event id",
    "matrix.MatrixStranger.user_id": "a Matrix user id the homeserver vouches for",
}


def _text_columns() -> dict[str, models.Field[Any, Any]]:
    columns: dict[str, models.Field[Any, Any]] = {}
    for model in apps.get_models():
        for column in model._meta.concrete_fields:
            if isinstance(column, models.CharField | models.TextField | models.JSONField):
                columns[f"{model._meta.label}.{column.name}"] = column
    return columns


class TestInventory:
    def test_every_text_column_redacts_or_says_why_it_holds_no_outside_text(self) -> None:
        unclassified = [
            name
            for name, column in _text_columns().items()
            if not isinstance(column, REDACTING)
            and name not in NOT_OUTSIDE_TEXT
            and name.split(".")[0] not in NOT_OUTSIDE_TEXT_APPS
        ]

        assert not unclassified, f"redact these on write, or add each to NOT_OUTSIDE_TEXT with a reason: {unclassified}"

    def test_the_exceptions_name_real_columns_that_do_not_redact(self) -> None:
        columns = _text_columns()

        stale = [name for name in NOT_OUTSIDE_TEXT if name not in columns or isinstance(columns[name], REDACTING)]

        assert not stale

    def test_the_columns_that_held_signal_text_raw_redact(self) -> None:
        columns = _text_columns()
        for name in (
            "agent.AgentSession.title",
            "watch.Investigation.title",
            "watch.Investigation.event",
            "watch.Investigation.escalation",
            "watch.WatchedEvent.data",
        ):
            assert isinstance(columns[name], REDACTING), name


@pytest.fixture
def configured_secret(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("STORED_TEST_SECRET", SECRET)
    settings.HERMES_REDACT = ["STORED_TEST_SECRET"]
    return SECRET


class TestKeys:
    def test_a_key_holding_a_secret_is_redacted_and_its_value_kept(self, configured_secret: str) -> None:
        value = {"plain": 1, f"token={configured_secret}": {"inner": configured_secret}}

        assert redact_value(value) == {"plain": 1, f"token={REDACTED}": {"inner": REDACTED}}

    def test_keys_redacted_alike_are_numbered_and_overwrite_nothing(
        self, configured_secret: str, settings: Settings, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        other = "hermes-other-secret-0f9e8d7c"
        monkeypatch.setenv("STORED_TEST_OTHER", other)
        settings.HERMES_REDACT = ["STORED_TEST_SECRET", "STORED_TEST_OTHER"]

        redacted = redact_value({REDACTED: "already", configured_secret: "first", other: "second"})

        assert redacted == {REDACTED: "already", f"{REDACTED} 2": "first", f"{REDACTED} 3": "second"}


def _raw_dump() -> str:
    """Every row of every table, read past the ORM."""
    dump = []
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names(cursor):
            cursor.execute(f'SELECT * FROM "{table}"')
            dump.append(f"{table}: {cursor.fetchall()!r}")
    return "\n".join(dump)


async def _signal_investigated(hub: ToolHub, sim: RunningSim, summary: str) -> None:
    """Fire a signal once a watcher follows the stream; return when its investigation has ended."""
    claimed: asyncio.Queue[Claim | None] = asyncio.Queue()
    policy = TriggerPolicy(
        kinds=frozenset({"signal.fired"}), min_severity="warning", cooldown_seconds=1800.0, hourly_cap=6
    )
    watcher = Watcher(hub=hub, policy=policy, on_claim=lambda _event, claim: claimed.put_nowait(claim))
    task = asyncio.get_running_loop().create_task(watcher.run())
    try:
        await asyncio.wait_for(watcher.connected.wait(), 10)
        signal_fire(sim.state.world, sim.state.events, "service:postgres", "wal_archive_failing", "critical", summary)
        claim = await asyncio.wait_for(claimed.get(), 20)
        assert claim is not None and claim.outcome == "opened"
        while watcher.investigations:
            await asyncio.gather(*watcher.investigations)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


@pytest.mark.django_db(transaction=True)
class TestSignalText:
    async def test_a_secret_in_a_signals_text_is_redacted_in_every_column_and_on_every_page(
        self, configured_secret: str, llm: FakeAnthropic, oikos_settings: RunningSim, oikos_hub: ToolHub
    ) -> None:
        llm.responder = DegradedInvestigator()

        await _signal_investigated(oikos_hub, oikos_settings, f"archive_command failing: password={SECRET} rejected")

        investigation = await database_sync_to_async(Investigation.objects.get)()
        session = await database_sync_to_async(AgentSession.objects.get)(pk=investigation.session_id)
        event = await database_sync_to_async(WatchedEvent.objects.get)()
        assert f"password={REDACTED} rejected" in session.title
        assert f"password={REDACTED} rejected" in investigation.title
        assert investigation.event["data"]["summary"] == f"archive_command failing: password={REDACTED} rejected"
        assert event.data["summary"] == investigation.event["data"]["summary"]
        dump = await database_sync_to_async(_raw_dump)()
        assert "watch_investigations" in dump and REDACTED in dump
        assert configured_secret not in dump
        assert configured_secret not in repr(llm.requests), "the model was never told it either"

        client = AsyncClient()
        pages = [
            "/ui/",
            f"/ui/s/{session.id}/",
            "/ui/sessions/",
            "/ui/sessions/nav/",
            "/ui/investigations/",
            "/ui/investigations/list/",
            "/ui/ledger/",
            "/ui/search/?q=archive_command",
            "/sessions",
            f"/sessions/{session.id}",
            f"/sessions/{session.id}/export.md",
            f"/sessions/{session.id}/export.json",
            "/search?q=archive_command",
            "/admin/watch/investigation/",
            f"/admin/watch/investigation/{investigation.pk}/change/",
            "/admin/watch/watchedevent/",
            f"/admin/watch/watchedevent/{event.pk}/change/",
            "/admin/agent/agentsession/",
            f"/admin/agent/agentsession/{session.id}/change/",
        ]
        shown = {}
        for path in pages:
            response = await client.get(path)
            assert response.status_code == 200, path
            shown[path] = response.content.decode()
        assert REDACTED in shown[f"/ui/s/{session.id}/"]
        assert not [path for path, body in shown.items() if configured_secret in body]


@pytest.mark.django_db(transaction=True)
class TestOikosSeam:
    async def test_oikos_answers_and_events_reach_hermes_redacted(
        self, configured_secret: str, oikos_settings: RunningSim
    ) -> None:
        world, events = oikos_settings.state.world, oikos_settings.state.events
        signal_fire(world, events, "service:postgres", "wal_archive_failing", "critical", f"key {configured_secret}")

        async with OikosClient.from_settings() as oikos:
            health = await oikos.health()
            # `events()` is an async generator: closed here, before its client is.
            stream = cast(AsyncGenerator[OikosEvent, None], oikos.events())
            first = await anext(stream)
            await stream.aclose()

        assert configured_secret not in repr(health)
        assert first.data["summary"] == f"key {REDACTED}"


# Models that moved app after their migration was written (state only, same tables): where they live now.
MOVED = {("controlroom", "ApprovalDecision"): "oikos", ("controlroom", "TargetContext"): "oikos"}


def _app_now(app: str, model: str) -> str:
    return MOVED.get((app, model), app)


STORED_REDACT_MIGRATIONS = [
    "watch.migrations.0003_stored_redact",
    "controlroom.migrations.0004_stored_redact",
    "interop.migrations.0004_stored_redact",
    "matrix.migrations.0002_stored_redact",
]


@pytest.mark.django_db(transaction=True)
class TestMigration:
    @pytest.mark.parametrize("name", STORED_REDACT_MIGRATIONS)
    def test_each_rewrites_only_columns_that_now_redact(self, name: str) -> None:
        migration = importlib.import_module(name)
        for app, model, columns in migration.STORED_RAW:
            for column in columns:
                field = apps.get_model(_app_now(app, model), model)._meta.get_field(column)
                assert isinstance(field, REDACTING), (model, column)

    def test_together_they_rewrite_every_column_made_redacting_here(self) -> None:
        listed = {
            f"{_app_now(app, model)}.{model}.{column}"
            for name in STORED_REDACT_MIGRATIONS
            for app, model, columns in importlib.import_module(name).STORED_RAW
            for column in columns
        }
        made_redacting = {
            "agent.AgentSession.title",
            "agent.Elicitation.reason",
            "interop.PeerConversation.external_id",
            "interop.PeerConversation.remote_task_id",
            "interop.PeerConversation.remote_state",
            "interop.A2ATask.context_id",
            "oikos.ApprovalDecision.reason",
            "oikos.ApprovalDecision.detail",
            "oikos.TargetContext.blast_radius",
            "oikos.TargetContext.executions",
            "oikos.TargetContext.blast_problem",
            "oikos.TargetContext.executions_problem",
            "watch.Investigation.entity",
            "watch.Investigation.kind",
            "watch.Investigation.severity",
            "watch.Investigation.title",
            "watch.Investigation.event",
            "watch.Investigation.storm_events",
            "watch.Investigation.escalation",
            "watch.WatchedEvent.data",
            "matrix.MatrixApprovalCard.request",
            "matrix.MatrixApprovalCard.detail",
        }
        # JSON columns that redacted before but not their keys.
        keys_only = {f"{label}.{column}" for label, column in [
            ("agent.Message", "content"), ("agent.Activity", "arguments"), ("agent.Activity", "result"),
            ("agent.ToolCatalog", "tools"), ("agent.Elicitation", "requested_schema"), ("agent.Elicitation", "fields"),
            ("agent.Elicitation", "content"), ("interop.A2ATask", "data"),
        ]}  # fmt: skip
        json_columns = {name for name, column in _text_columns().items() if isinstance(column, RedactedJSONField)}

        assert listed == made_redacting | keys_only
        assert json_columns - BORN_REDACTING <= listed

    def test_watch_0003_redacts_what_earlier_versions_stored_raw(self, configured_secret: str) -> None:
        session_id = uuid.uuid4()
        raw_event = f'{{"data": {{"summary": "password={configured_secret}", "{configured_secret}": 1}}}}'
        with connection.cursor() as cursor:  # past the redacting fields, as an earlier Hermes wrote it
            cursor.execute(
                "INSERT INTO agent_sessions (id, title, actor, origin, model, created_at, last_active_at,"
                " context_tokens, context_window, compactions) VALUES (%s, %s, 'agent:hermes', 'signal', '',"
                " '2026-11-30 10:00:00', '2026-11-30 10:00:00', 0, 0, 0)",
                [session_id.hex if connection.vendor == "sqlite" else str(session_id), f"down: {configured_secret}"],
            )
            cursor.execute(
                "INSERT INTO watch_events (epoch, event_id, seq, type, at, data, claimed_at, outcome)"
                " VALUES (1, '7', 7, 'signal.fired', '', %s, '2026-11-30 10:00:00', 'opened')",
                [raw_event],
            )
        assert configured_secret in _raw_dump()
        migration = importlib.import_module("watch.migrations.0003_stored_redact")

        migration.stored_secrets_redact(apps, None)

        assert configured_secret not in _raw_dump()
        assert AgentSession.objects.get().title == f"down: {REDACTED}"
        assert WatchedEvent.objects.get().data == {"data": {"summary": f"password={REDACTED}", REDACTED: 1}}


@pytest.mark.django_db(transaction=True)
class TestNotes:
    """A note holding a configured secret, written by a script, is stored and shown redacted."""

    def test_a_note_posted_with_a_secret_is_stored_and_shown_redacted(
        self, configured_secret: str, client: Any
    ) -> None:
        from agent.models import Note

        answer = client.post(
            "/notes",
            {"text": f"The backup password is {configured_secret}", "entities": ["service:restic"], "tags": ["backup"]},
            content_type="application/json",
        )

        assert answer.status_code == 201
        assert configured_secret not in answer.content.decode() and REDACTED in answer.json()["text"]
        with connection.cursor() as cursor:
            cursor.execute("SELECT text FROM agent_notes")
            (stored,) = cursor.fetchone()
        assert configured_secret not in stored and REDACTED in stored
        note_id = Note.objects.get().pk
        for path in (f"/notes/{note_id}", "/notes?entity=service:restic", f"/ui/notes/{note_id}/", "/ui/notes/"):
            shown = client.get(path).content.decode()
            assert configured_secret not in shown and REDACTED in shown, path
