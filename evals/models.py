"""Eval runs and their results: what was run, on which models, and how each case scored.

A result keeps the session its turn ran in (the transcript) and the turn id (the ledger's
correlation id), so any score can be checked against what the model actually saw and did.
"""

from __future__ import annotations

import uuid

from django.db import models

from agent.fields import RedactedJSONField, RedactedTextField
from agent.models import AgentSession


class EvalRun(models.Model):
    class Status(models.TextChoices):
        RUNNING = "running"
        DONE = "done"
        # Stopped before every case ran (Ctrl-C, a crash): its results so far stand.
        INTERRUPTED = "interrupted"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # What was asked for: models, judge, the case filter, repeats; and a label to compare by ("prompt v2").
    model_names = models.JSONField(default=list)
    judge_model = models.CharField(max_length=100, blank=True)
    tags = models.JSONField(default=list, blank=True)
    case_ids = models.JSONField(default=list, blank=True)
    repeat = models.PositiveSmallIntegerField(default=1)
    label = models.CharField(max_length=200, blank=True)
    # Who ran it (an operator, `ci`), and the Hermes version it ran on.
    by = models.CharField(max_length=150, blank=True)
    version = models.CharField(max_length=60, blank=True)
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.RUNNING)
    started_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "evals_runs"
        ordering = ["-started_at"]

    def __str__(self) -> str:
        return f"eval run {self.started_at:%Y-%m-%d %H:%M} ({', '.join(self.model_names)})"


class EvalResult(models.Model):
    """One case run once on one model: its checks, its judged items, its score and its cost."""

    run = models.ForeignKey(EvalRun, on_delete=models.CASCADE, related_name="results")
    case_id = models.CharField(max_length=80)
    # The case file's digest when it ran: history across runs shows where the case itself changed.
    case_digest = models.CharField(max_length=12, blank=True)
    case_tags = models.JSONField(default=list, blank=True)
    model = models.CharField(max_length=100)
    attempt = models.PositiveSmallIntegerField(default=1)
    session = models.ForeignKey(
        AgentSession, on_delete=models.SET_NULL, null=True, blank=True, related_name="eval_results"
    )
    # The judged turn (the last one of a conversation): the ledger's correlation id.
    turn_id = models.UUIDField(null=True, blank=True)
    passed = models.BooleanField(default=False)
    # 0..1: the share of expected facts stated and forbidden claims avoided; 0 when a gate failed hard.
    score = models.FloatField(default=0.0)
    # Deterministic checks: [{"check", "ok", "detail"}] (tools, approvals, budgets, numbers).
    checks = RedactedJSONField(default=list, blank=True)
    # The judge's items: [{"kind": "fact"|"forbidden", "text", "ok", "reason"}].
    judged = RedactedJSONField(default=list, blank=True)
    # Why it failed, as short codes: missing_fact, forbidden_claim, forbidden_tool, ...
    failures = models.JSONField(default=list, blank=True)
    answer = RedactedTextField(blank=True)
    error = RedactedTextField(blank=True)
    tokens = models.PositiveBigIntegerField(default=0)
    judge_tokens = models.PositiveBigIntegerField(default=0)
    cost_usd = models.DecimalField(max_digits=12, decimal_places=6, null=True, blank=True)
    tool_calls = models.PositiveIntegerField(default=0)
    latency_ms = models.PositiveIntegerField(default=0)
    started_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "evals_results"
        ordering = ["run", "case_id", "model", "attempt"]
        indexes = [
            models.Index(fields=["case_id", "-started_at"], name="evals_result_case_idx"),
            models.Index(fields=["run", "model"], name="evals_result_run_model_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.case_id} on {self.model}: {self.score:.2f}"
