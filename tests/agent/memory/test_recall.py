"""Recall: which notes a turn is given, and what reaches the model (the scripted model records it)."""

from __future__ import annotations

import uuid

import pytest
from channels.db import database_sync_to_async
from pytest_django.fixtures import Settings

from agent.memory import notes
from agent.memory.recall import recall
from agent.models import Note, NoteProposal, Turn
from agent.tools import ToolHub
from tests.agent.conftest import ask
from tests.fakes import FakeAnthropic, Reply

pytestmark = pytest.mark.django_db(transaction=True)


def _note(
    text: str, *, entities: list[str] | None = None, tags: list[str] | None = None, runbook: bool = False
) -> Note:
    return notes.note_create(
        notes.NoteDraft(text=text, entities=entities or [], tags=tags or [], runbook=runbook), author="operator:alice"
    )


def _ids(question: str, earlier: str = "", budget: int | None = None) -> list[int]:
    return [note.id for note in recall(question, earlier=earlier, budget_tokens=budget).given]


class TestMatching:
    def test_a_note_is_recalled_by_slug_by_bare_name_and_by_glob(self) -> None:
        sonarr = _note("Sonarr's indexer timeouts clear with a restart.", entities=["service:sonarr"])
        media = _note("The media LXCs share /mnt/media.", entities=["lxc:media-*"])
        assert _ids("why is service:sonarr slow?") == [sonarr.pk]
        assert _ids("Why is Sonarr slow?") == [sonarr.pk]
        assert _ids("is lxc:media-2 healthy?") == [media.pk]
        assert _ids("and media-3?") == [media.pk]
        assert _ids("what about jellyfin?") == []

    def test_tags_match_words_and_signal_kinds(self) -> None:
        timeout = _note("Timeouts on the reverse proxy: check caddy first.", tags=["http_timeout"])
        backups = _note("Backups run at 03:00 to the NAS.", tags=["backup"])
        assert _ids("- kind: http_timeout, severity: warning") == [timeout.pk]
        assert _ids("an http timeout again") == [timeout.pk]
        assert _ids("did the backup run?") == [backups.pk]

    def test_a_note_without_scope_is_recalled_by_shared_words_and_star_by_every_question(self) -> None:
        free = _note("Collabora must be restarted after a nextcloud upgrade.")
        always = _note("The homelab runs in Europe/Lisbon time.", entities=["*"])
        assert set(_ids("I upgraded nextcloud, anything to restart?")) == {free.pk, always.pk}
        assert _ids("hello") == [always.pk]

    def test_inactive_notes_are_never_recalled(self) -> None:
        note = _note("Sonarr: restart clears it.", entities=["service:sonarr"])
        Note.objects.filter(pk=note.pk).update(active=False)
        assert _ids("sonarr?") == []

    def test_runbooks_come_first_and_the_share_is_bounded(self) -> None:
        fact = _note("Sonarr lives on lxc:arr.", entities=["service:sonarr"])
        runbook = _note(
            "# Sonarr indexer timeouts\n1. restart sonarr\n2. never touch prowlarr",
            entities=["service:sonarr"],
            runbook=True,
        )
        big = _note("Sonarr history: " + "x" * 4000, entities=["service:sonarr"])
        found = recall("sonarr is timing out", budget_tokens=200)
        assert [n.id for n in found.given] == [runbook.pk, fact.pk]
        assert [n.id for n in found.left_out] == [big.pk]
        assert f"[note {big.pk}]" in found.text and "x" * 100 not in found.text
        assert found.text.index("Runbooks") < found.text.index(f"[note {fact.pk}]")
        assert recall("sonarr", budget_tokens=0).given == []

    def test_the_previous_question_counts_for_a_follow_up(self) -> None:
        note = _note("Sonarr: restart clears indexer timeouts.", entities=["service:sonarr"])
        assert _ids("restart it", earlier="why is sonarr slow?") == [note.pk]


class TestNotes:
    def test_bad_scope_is_refused_with_what_is_wrong_and_nothing_stored(self) -> None:
        with pytest.raises(notes.NoteInvalid, match="not an entity"):
            _note("x", entities=["sonarr"])
        with pytest.raises(notes.NoteInvalid, match="needs text"):
            _note("   ")
        with pytest.raises(notes.NoteInvalid, match="runbook needs"):
            _note("do this", runbook=True)
        assert Note.objects.count() == 0

    def test_a_configured_secret_is_stored_redacted(self, settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("NOTES_TEST_SECRET", "hunter2-secret-value")
        settings.HERMES_REDACT = ["NOTES_TEST_SECRET"]
        note = _note("The NAS password is hunter2-secret-value, do not share.", entities=["host:nas"])
        note.refresh_from_db()
        assert "hunter2-secret-value" not in note.text and "[REDACTED]" in note.text

    def test_a_proposal_becomes_a_note_only_by_one_operators_click(self) -> None:
        proposal = notes.note_propose(
            notes.NoteDraft(text="jellyfin's transcodes go to /mnt/scratch", entities=["service:jellyfin"]),
            proposed_by="operator:alice",
            session_id=None,
            turn_id=uuid.uuid4(),
        )
        assert Note.objects.count() == 0
        note = notes.note_proposal_save(proposal.pk, by="operator:bob")
        assert note.author == "operator:bob" and note.source_turn == proposal.turn_id
        with pytest.raises(notes.NoteProposalDecided, match="saved by operator:bob"):
            notes.note_proposal_dismiss(proposal.pk, by="operator:carol")
        assert NoteProposal.objects.get(pk=proposal.pk).note_id == note.pk
        assert Note.objects.count() == 1


class TestTurns:
    async def test_the_request_carries_the_matching_notes_and_the_turn_records_them(
        self, llm: FakeAnthropic, hub: ToolHub
    ) -> None:
        note = await database_sync_to_async(_note)(
            "Sonarr's indexer timeouts clear with a restart; don't touch prowlarr.", entities=["service:sonarr"]
        )
        await database_sync_to_async(_note)("Jellyfin transcodes to /mnt/scratch.", entities=["service:jellyfin"])
        llm.enqueue(Reply.text(f"Restart it [note {note.pk}]."), Reply.text("ok"))

        handle, _ = await ask("why is sonarr timing out?", hub)

        request = llm.requests[0].body
        system = "\n".join(block["text"] for block in request["system"])
        assert f"[note {note.pk}]" in system and "don't touch prowlarr" in system
        assert "/mnt/scratch" not in system
        # The persona block stays first and cached; the notes come after it, unmarked.
        assert "cache_control" in request["system"][0] and "cache_control" not in request["system"][1]
        turn = await database_sync_to_async(Turn.objects.get)(pk=handle.turn_id)
        assert turn.notes_given == [{"id": note.pk, "title": note.title, "runbook": False}]

        # A question about nothing a note covers is given none.
        handle, _ = await ask("hello there", hub)
        assert len(llm.requests[1].body["system"]) == 1
        turn = await database_sync_to_async(Turn.objects.get)(pk=handle.turn_id)
        assert turn.notes_given == []

    async def test_a_turn_started_without_recall_is_given_no_note(self, llm: FakeAnthropic, hub: ToolHub) -> None:
        await database_sync_to_async(_note)("Sonarr: restart clears it.", entities=["service:sonarr"])
        llm.enqueue(Reply.text("ok"))

        handle, _ = await ask("why is sonarr slow?", hub, recall=False)

        assert len(llm.requests[0].body["system"]) == 1
        turn = await database_sync_to_async(Turn.objects.get)(pk=handle.turn_id)
        assert turn.notes_given == []
