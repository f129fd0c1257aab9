"""Interop state: pairing tokens, conversations with peer agents, their exchanges, A2A tasks.

A conversation is one thread with one peer in one dialect and one direction: inbound ones are keyed
by the GarraIA task id or the A2A `contextId` the peer uses and map to one Hermes session; outbound
ones are keyed by the id the peer gave the thread (`a2a_send`, `a2a_talk`). Every message either way
is a `PeerExchange`, which is also what the rate windows count.
"""

from __future__ import annotations

import uuid

from django.db import models

from agent.fields import RedactedCharField, RedactedJSONField, RedactedTextField
from agent.models import AgentSession, Turn


class PairingToken(models.Model):
    """A per-peer bearer token for the A2A routes. Only a digest of its secret is stored."""

    peer = models.CharField(max_length=100)
    # The public half of the token (`hat_<key_id>_<secret>`): finds the row without a secret lookup.
    key_id = models.CharField(max_length=16, unique=True)
    # SHA-256 hex of the secret half; the token itself is shown once, when issued.
    digest = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "interop_pairing_tokens"
        ordering = ["peer", "-created_at"]

    def __str__(self) -> str:
        return f"{self.peer} ({self.key_id})"

    @property
    def revoked(self) -> bool:
        return self.revoked_at is not None


class PeerConversation(models.Model):
    class Direction(models.TextChoices):
        INBOUND = "inbound"  # a peer talks to Hermes
        OUTBOUND = "outbound"  # Hermes talks to a peer

    class Dialect(models.TextChoices):
        A2A = "a2a"
        GARRAIA = "garraia"

    class Status(models.TextChoices):
        OPEN = "open"
        STOPPED = "stopped"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    peer = models.CharField(max_length=100)
    dialect = models.CharField(max_length=10, choices=Dialect.choices)
    direction = models.CharField(max_length=10, choices=Direction.choices)
    # The peer's id for the thread: GarraIA task id, or A2A contextId.
    external_id = RedactedCharField(max_length=200)
    session = models.ForeignKey(
        AgentSession, on_delete=models.SET_NULL, null=True, blank=True, related_name="peer_conversations"
    )
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.OPEN)
    # Why it stopped: stop_marker, turn_cap, no_progress, remote_state, wall_clock, operator, ...
    stop_reason = models.CharField(max_length=40, blank=True)
    turns = models.PositiveIntegerField(default=0)
    # A2A: the last task of the thread and its state (an input-required task is continued by id).
    remote_task_id = RedactedCharField(max_length=200, blank=True)
    remote_state = RedactedCharField(max_length=30, blank=True)
    started_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "interop_peer_conversations"
        ordering = ["-updated_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["direction", "peer", "dialect", "external_id"], name="interop_conversation_unique"
            )
        ]

    def __str__(self) -> str:
        arrow = "→" if self.direction == self.Direction.OUTBOUND else "←"
        return f"{arrow} {self.peer} {self.dialect} {self.external_id}"


class PeerExchange(models.Model):
    """One message of a conversation and the answer to it, either way."""

    conversation = models.ForeignKey(
        PeerConversation, on_delete=models.CASCADE, related_name="exchanges", null=True, blank=True
    )
    # Denormalised so the rate windows can count without a join, even for a failed first message.
    peer = models.CharField(max_length=100)
    direction = models.CharField(max_length=10, choices=PeerConversation.Direction.choices)
    # The Hermes turn that answered (inbound) or read the reply (outbound), when there is one.
    turn = models.ForeignKey(Turn, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    message = RedactedTextField()
    reply = RedactedTextField(blank=True)
    # working, completed, failed, canceled, rejected, input_required, error (no answer at all)
    state = models.CharField(max_length=30, default="working")
    error = RedactedTextField(blank=True)
    started_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    duration_ms = models.PositiveIntegerField(default=0)

    class Meta:
        db_table = "interop_peer_exchanges"
        ordering = ["started_at", "id"]
        indexes = [models.Index(fields=["peer", "direction", "started_at"], name="interop_exchange_rate_idx")]

    def __str__(self) -> str:
        return f"exchange {self.pk} with {self.peer}"


class A2ATask(models.Model):
    """An A2A 1.0 task as the SDK's task store sees it (the protobuf as JSON), scoped to its peer."""

    id = models.CharField(primary_key=True, max_length=200)
    owner = models.CharField(max_length=100)
    context_id = RedactedCharField(max_length=200)
    state = models.CharField(max_length=40)
    data = RedactedJSONField()
    # Counts the writes to the task (the SDK's `TaskVersion`): a writer holding an older version
    # loses, so a task cancelled or settled by one process is never overwritten by another.
    version = models.PositiveIntegerField(default=0)
    # The Hermes turn answering the task's message: a task whose turn stopped reads as terminal.
    turn = models.ForeignKey(Turn, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "interop_a2a_tasks"
        ordering = ["-updated_at"]
        indexes = [models.Index(fields=["owner", "context_id"], name="interop_task_context_idx")]

    def __str__(self) -> str:
        return f"A2A task {self.id}"
