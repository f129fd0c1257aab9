"""What the control room itself remembers: every approval decision attempted, and what Oikos said
about the targets of approval cards (a short-lived cache, `TargetContext`).

Oikos is the authority on approvals; this is Hermes's own audit of who pressed Approve or Deny,
when, and what Oikos answered (including "already decided" and failures to reach it) — and of the
attempts Hermes itself refused before asking Oikos (no operator identity, a failed CSRF check, a
malformed decision), with the reason and the address they came from.
"""

from __future__ import annotations

from django.db import models

from agent.fields import RedactedJSONField, RedactedTextField


class ApprovalDecision(models.Model):
    class Decision(models.TextChoices):
        APPROVE = "approve"
        DENY = "deny"

    class Outcome(models.TextChoices):
        # Oikos recorded this decision.
        DECIDED = "decided", "Decided"
        # Someone decided first (Oikos answered 409); `detail` names who.
        ALREADY_DECIDED = "already_decided", "Already decided"
        # Oikos refused it (403: not an operator) or does not know the approval (404).
        REFUSED = "refused", "Refused by Oikos"
        # Oikos could not be reached or answered something unexpected.
        FAILED = "failed", "Oikos unreachable or failing"
        # Hermes refused the attempt before asking Oikos; `detail` says why and from where.
        REJECTED = "rejected", "Refused by Hermes"

    approval_id = models.CharField(max_length=100)
    execution_id = models.CharField(max_length=100, blank=True)
    decision = models.CharField(max_length=10, choices=Decision.choices)
    operator = models.CharField(max_length=150)
    reason = RedactedTextField(blank=True)
    outcome = models.CharField(max_length=20, choices=Outcome.choices)
    detail = RedactedTextField(blank=True)
    decided_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "controlroom_approval_decisions"
        ordering = ["-decided_at", "-id"]
        indexes = [models.Index(fields=["approval_id"], name="cr_decision_approval_idx")]

    def __str__(self) -> str:
        return f"{self.operator} {self.decision} {self.approval_id}: {self.outcome}"


class TargetContext(models.Model):
    """What an approval card says about its target, as Oikos answered when a card last asked.

    Fetched by Hermes (never by the model) when a card is raised, and kept for
    `HERMES_CARD_CONTEXT_TTL` seconds so that drawing cards — every rail redraw, every page, every
    process — does not call Oikos again. A failed fetch is stored too (with `problem`), for a
    shorter while, so an Oikos that is down does not slow every page down.
    """

    target = models.CharField(max_length=200, primary_key=True)
    # `[{slug, depth, via, type, health}]`, nearest first, as Oikos's blast radius lists them.
    blast_radius = RedactedJSONField(default=list)
    # `[{execution_id, action, status, requested_by, requested_at, finished_at}]`, newest first.
    executions = RedactedJSONField(default=list)
    # Why the blast radius or the executions are missing ("" when both came back).
    blast_problem = RedactedTextField(blank=True)
    executions_problem = RedactedTextField(blank=True)
    fetched_at = models.DateTimeField()

    class Meta:
        db_table = "controlroom_target_contexts"

    def __str__(self) -> str:
        return f"{self.target} @ {self.fetched_at:%Y-%m-%d %H:%M:%S}"
