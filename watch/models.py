"""What the watcher saw of Oikos's event stream, and the investigations it opened.

`WatchedEvent` is both the claim and the cursor: a watcher handles an event only after inserting
its row, and the unique (`epoch`, `event_id`) lets exactly one of any number of watchers win that
insert — in the database, PostgreSQL or SQLite alike, never by a lock in one process's memory. The
highest stored id of the newest epoch is where every watcher resumes after a restart.

An epoch is one numbering of Oikos's events: an Oikos that lost its event store (a restarted
oikos_sim, a rebuilt database) numbers from 1 again, and its new events are claimed in the next
epoch instead of colliding with the old ones (watch/watcher.py says how a watcher notices).
"""

from __future__ import annotations

from django.db import models

from agent.fields import RedactedCharField, RedactedJSONField, RedactedTextField
from agent.models import AgentSession


class Investigation(models.Model):
    """A session Hermes opened itself because of an event, and the escalation it ended with."""

    class State(models.TextChoices):
        OPEN = "open"  # the turn is running, or ran and nothing said it is over
        RESOLVED = "resolved"  # Oikos said the signal resolved / the entity is healthy again
        SKIPPED = "skipped"  # recorded without a model call (`skipped_reason` says why)
        # Its turn was cut off (or never started: its watcher stopped) and so was its retry.
        INTERRUPTED = "interrupted"

    session = models.OneToOneField(
        AgentSession, on_delete=models.SET_NULL, null=True, blank=True, related_name="investigation"
    )
    # Which entity and what kind of trouble: the cooldown key (`service:sonarr`, `http_timeout`).
    entity = RedactedCharField(max_length=200, blank=True)
    kind = RedactedCharField(max_length=100)
    severity = RedactedCharField(max_length=20, blank=True)
    title = RedactedCharField(max_length=200)
    state = models.CharField(max_length=12, choices=State.choices, default=State.OPEN)
    # Generic on purpose: "budget", "hourly_cap", ... — whatever kept the model from being called.
    skipped_reason = models.CharField(max_length=40, blank=True)
    # A storm investigation summarises the events past the hourly cap instead of one each.
    storm = models.BooleanField(default=False)
    # How often it fired: 1 at opening, +1 for each repeat within the cooldown ("fired again xN").
    fired_count = models.PositiveIntegerField(default=1)
    first_event_id = models.CharField(max_length=40)
    event = RedactedJSONField(default=dict)
    # The storm's other events, in brief: [{"id", "type", "entity", "kind", "severity"}].
    storm_events = RedactedJSONField(default=list, blank=True)
    # {"summary", "impact", "evidence": [{"tool", "correlation_id", ...}], "likely_cause",
    #  "next_step", "approvals": [...]} — filled when the investigation turn ends.
    escalation = RedactedJSONField(default=dict, blank=True)
    # What its brief recalled of the last times (watch/recollection.py): {"ids": [earlier
    # investigations], "fired": n, "investigations": n, "days": 30, "also": n other kinds}, so
    # that its pages link exactly what the model was given. Ids and counts only.
    recalled = models.JSONField(default=dict, blank=True)
    # The watcher process running it (`Instance.id`) and the turn it started, so that a watcher
    # starting can tell one whose watcher died (its turn interrupted, or never started) from one
    # still running (`watch.services.investigations_recover`); `attempts` counts its runs.
    owner = models.UUIDField(null=True, blank=True)
    turn_id = models.UUIDField(null=True, blank=True)
    attempts = models.PositiveSmallIntegerField(default=1)
    opened_at = models.DateTimeField(auto_now_add=True)
    last_fired_at = models.DateTimeField(auto_now_add=True)
    # When Oikos raised the newest event counted on it (the event's `at`, else its claim): events
    # for the same entity raised within the policy's incident window join it (watch/services.py).
    raised_at = models.DateTimeField(null=True, blank=True)
    resolved_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "watch_investigations"
        ordering = ["-opened_at"]
        indexes = [
            models.Index(fields=["entity", "kind", "-last_fired_at"], name="watch_inv_key_idx"),
            models.Index(fields=["-opened_at"], name="watch_inv_opened_idx"),
        ]

    def __str__(self) -> str:
        return self.title


class WatchedEvent(models.Model):
    class Outcome(models.TextChoices):
        IGNORED = "ignored"  # the trigger policy does not open investigations for it
        OPENED = "opened"
        SUPPRESSED = "suppressed"  # counted on an open investigation (cooldown) or a storm
        SKIPPED = "skipped"
        RESOLVED = "resolved"
        # Raised before a watcher's first start, outside the backlog it was told to replay
        # (HERMES_WATCH_BACKLOG): recorded as the position to resume from, never investigated.
        BACKLOG = "backlog"

    # Which numbering of Oikos's events the id belongs to (1, then +1 each time the ids restart).
    epoch = models.PositiveIntegerField(default=1)
    # Oikos's event id (the SSE id): with `epoch`, the claim. Numeric ids sort by `seq`.
    event_id = models.CharField(max_length=40)
    seq = models.BigIntegerField(null=True)
    type = models.CharField(max_length=60)
    at = models.CharField(max_length=40, blank=True)
    data = RedactedJSONField(default=dict)
    # The `Instance` id of the watcher that claimed it.
    claimed_by = models.UUIDField(null=True, blank=True)
    claimed_at = models.DateTimeField(auto_now_add=True)
    outcome = models.CharField(max_length=12, choices=Outcome.choices, default=Outcome.IGNORED)
    investigation = models.ForeignKey(
        Investigation, on_delete=models.SET_NULL, null=True, blank=True, related_name="events"
    )

    class Meta:
        db_table = "watch_events"
        ordering = ["-epoch", "-seq"]
        constraints = [models.UniqueConstraint(fields=["epoch", "event_id"], name="watch_event_claim")]
        indexes = [models.Index(fields=["-epoch", "-seq"], name="watch_event_position_idx")]

    def __str__(self) -> str:
        return f"{self.type} #{self.event_id}" if self.epoch == 1 else f"{self.type} #{self.epoch}.{self.event_id}"


class Schedule(models.Model):
    """A question Hermes asks on its own at the times of a cron expression (watch/schedules.py).

    `manage.py watch` runs it: each due slot is claimed by inserting a `ScheduleRun` (unique on
    schedule and slot), so with any number of watchers a slot runs once.
    """

    class Kind(models.TextChoices):
        QUESTION = "question"  # `question` is asked as written
        DIGEST = "digest"  # the built-in digest (watch/schedules.py `DIGEST_QUESTION`), verdict first

    name = RedactedCharField(max_length=100)
    kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.QUESTION)
    # The question a `question` schedule asks; a digest's is built in, and this is then empty.
    question = RedactedTextField(blank=True)
    # Five fields, as cron reads them, in `timezone` (an IANA name: Europe/Lisbon).
    cron = models.CharField(max_length=100)
    timezone = models.CharField(max_length=64, default="UTC")
    # Where each run's answer is also posted (the control room always has it): a Matrix room id.
    matrix_room = models.CharField(max_length=255, blank=True)
    # The model that answers (one of HERMES_MODELS); empty: the configured default.
    model = models.CharField(max_length=100, blank=True)
    # Read-only by default; with this, a run may propose executions for an operator to approve.
    may_propose = models.BooleanField(default=False)
    enabled = models.BooleanField(default=True)
    owner = models.CharField(max_length=150)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "watch_schedules"
        ordering = ["name", "id"]

    def __str__(self) -> str:
        return self.name


class ScheduleRun(models.Model):
    """One slot of a schedule: the claim, then what the run did (or why it did not run)."""

    class State(models.TextChoices):
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"  # the turn ended in error, or was interrupted
        # Not run: `skipped_reason` says why ("missed": the watchers were down over the slot and a
        # later slot ran instead; "budget_exhausted": the daily budget was spent; ... any code of
        # `agent.engine.runner.TurnRejected`). A failed run says why there too ("interrupted", "error").
        SKIPPED = "skipped"

    schedule = models.ForeignKey(Schedule, on_delete=models.CASCADE, related_name="runs")
    # The slot's time, as the cron expression gives it (stored in UTC).
    slot = models.DateTimeField()
    state = models.CharField(max_length=10, choices=State.choices, default=State.RUNNING)
    skipped_reason = models.CharField(max_length=40, blank=True)
    session = models.ForeignKey(
        AgentSession, on_delete=models.SET_NULL, null=True, blank=True, related_name="schedule_runs"
    )
    turn_id = models.UUIDField(null=True, blank=True)
    # The watcher process that claimed it (`Instance.id`).
    owner = models.UUIDField(null=True, blank=True)
    # Who ran it by hand (`manage.py schedule run`, the Schedules page); "" for a cron slot. A
    # manual run's slot is its time, off the whole minute, so it never takes a cron slot's claim.
    by = models.CharField(max_length=150, blank=True)
    # The answer's first line: "All green." / "2 degraded, 1 approval waiting."
    verdict = RedactedCharField(max_length=300, blank=True)
    claimed_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "watch_schedule_runs"
        ordering = ["-slot"]
        constraints = [models.UniqueConstraint(fields=["schedule", "slot"], name="watch_schedule_slot_claim")]
        indexes = [models.Index(fields=["-claimed_at"], name="watch_sched_run_claimed_idx")]

    def __str__(self) -> str:
        return f"{self.schedule} at {self.slot:%Y-%m-%d %H:%M}"
