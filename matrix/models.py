"""What the Matrix bridge keeps in the database, so that a restart (or a second bridge) neither
replays nor misses anything.

- `MatrixSync`: the bot's sync position (`next_batch`), stored after every batch is handled. A
  restarted bridge resumes from it: messages sent while it was down arrive then, older ones never.
- `MatrixEvent`: the claim on one Matrix event. A bridge handles an event only after inserting its
  row; the unique event id lets exactly one insert win, so a batch replayed after a crash between
  handling and storing the position is not answered twice. Its `kind`/`outcome` feed `/metrics`.
- `MatrixThread`: one Matrix thread is one Hermes session.
- `MatrixApprovalCard`: the approval card posted in a thread, edited as the execution goes on.
- `MatrixEscalation`: an investigation's escalation posted as a thread of the escalation room.
- `MatrixFollowUp`: the verdict of an execution's follow-up posted in the thread that asked for it.
- `MatrixSchedulePost`: a schedule's run posted in the schedule's room.
- `MatrixStranger`: a Matrix user who addressed Hermes without being an operator, told so once.
"""

from __future__ import annotations

from django.db import models

from agent.fields import RedactedJSONField, RedactedTextField
from agent.models import AgentSession, Change
from watch.models import Investigation, ScheduleRun


class MatrixSync(models.Model):
    user_id = models.CharField(max_length=255, unique=True)
    next_batch = models.CharField(max_length=255)
    # The bridge's first start: escalations of investigations opened before it are not posted.
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "matrix_sync"

    def __str__(self) -> str:
        return f"{self.user_id} at {self.next_batch}"


class MatrixEvent(models.Model):
    class Kind(models.TextChoices):
        QUESTION = "question"  # an operator asked: a turn, or "still working on the last one"
        STOP = "stop"
        DECISION = "decision"  # an operator's ✅/❌ or "approve"/"deny"
        IGNORED = "ignored"  # a stranger, a non-operator's reaction, chatter not for Hermes

    event_id = models.CharField(max_length=255, unique=True)
    room_id = models.CharField(max_length=255)
    sender = models.CharField(max_length=255)
    kind = models.CharField(max_length=10, choices=Kind.choices)
    # What came of it: `started`, `busy`, `rejected`, a decision outcome (`decided`, `already_decided`, ...), ...
    outcome = models.CharField(max_length=30, blank=True)
    claimed_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "matrix_events"
        indexes = [models.Index(fields=["kind", "outcome"], name="matrix_event_kind_idx")]

    def __str__(self) -> str:
        return f"{self.kind} {self.event_id} ({self.outcome or 'pending'})"


class MatrixThread(models.Model):
    room_id = models.CharField(max_length=255)
    # The event that opened the thread (the operator's first question): Matrix names threads by it.
    root_event_id = models.CharField(max_length=255)
    session = models.OneToOneField(AgentSession, on_delete=models.CASCADE, related_name="matrix_thread")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "matrix_threads"
        constraints = [models.UniqueConstraint(fields=["room_id", "root_event_id"], name="matrix_thread_root_uniq")]

    def __str__(self) -> str:
        return f"{self.room_id} thread {self.root_event_id}"


class MatrixApprovalCard(models.Model):
    thread = models.ForeignKey(MatrixThread, on_delete=models.CASCADE, related_name="cards")
    approval_id = models.CharField(max_length=100, unique=True)
    execution_id = models.CharField(max_length=100, blank=True)
    # The card's own event: reactions relate to it, edits replace it.
    event_id = models.CharField(max_length=255, unique=True)
    # {"action", "target", "risk_class", "reason"}: what the card shows whatever its state.
    request = RedactedJSONField(default=dict)
    # pending → approved/denied → running → completed/failed, as Oikos reports it.
    status = models.CharField(max_length=20, default="pending")
    decided_by = models.CharField(max_length=150, blank=True)
    # Where the decision was taken: "matrix", or "elsewhere" (the control room, another client).
    decided_via = models.CharField(max_length=20, blank=True)
    detail = RedactedTextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "matrix_approval_cards"

    def __str__(self) -> str:
        return f"card of {self.approval_id} ({self.status})"


class MatrixEscalation(models.Model):
    """The claim on posting an investigation's escalation (one thread per investigation, ever)."""

    investigation = models.OneToOneField(Investigation, on_delete=models.CASCADE, related_name="matrix_escalation")
    room_id = models.CharField(max_length=255)
    # The escalation's message, the root of the thread operators reply in ("" until it is posted).
    event_id = models.CharField(max_length=255, blank=True)
    posted_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "matrix_escalations"

    def __str__(self) -> str:
        return f"escalation of investigation {self.investigation_id}"


class MatrixFollowUp(models.Model):
    """The claim on posting an execution's follow-up in its session's thread (once per execution, ever)."""

    change = models.OneToOneField(Change, on_delete=models.CASCADE, related_name="matrix_followup")
    room_id = models.CharField(max_length=255)
    # The follow-up's message in the thread ("" until it is posted).
    event_id = models.CharField(max_length=255, blank=True)
    posted_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "matrix_followups"

    def __str__(self) -> str:
        return f"follow-up of execution {self.change_id}"


class MatrixStranger(models.Model):
    user_id = models.CharField(max_length=255, unique=True)
    told_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "matrix_strangers"

    def __str__(self) -> str:
        return self.user_id


class MatrixSchedulePost(models.Model):
    """The claim on posting a schedule's run in its Matrix room (once per run, ever, by any bridge).

    Inserted before the message is sent: a run whose post failed (a room the bot is not in, one
    that refuses it) stays `failed` with the reason, and is not tried again.
    """

    class State(models.TextChoices):
        POSTING = "posting"
        POSTED = "posted"
        FAILED = "failed"

    run = models.OneToOneField(ScheduleRun, on_delete=models.CASCADE, related_name="matrix_post")
    room_id = models.CharField(max_length=255)
    state = models.CharField(max_length=10, choices=State.choices, default=State.POSTING)
    # The message ("" until it is posted).
    event_id = models.CharField(max_length=255, blank=True)
    # Why it could not be posted (the homeserver's words, or the bridge's).
    error = RedactedTextField(blank=True)
    claimed_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "matrix_schedule_posts"

    def __str__(self) -> str:
        return f"post of schedule run {self.run_id} ({self.state})"
