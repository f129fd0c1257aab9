"""Hermes's persistent state: sessions, turns, messages and the tool-call ledger.

Messages store the exact Anthropic content blocks the API saw, so a session's history can be
replayed verbatim on the next turn. The ledger (`Activity`) keeps every tool call, under the turn id
that is also the correlation id shown to the operator: its row is written before the call is sent
and completed when the call ends, so a crash mid-call leaves a `started` row, never nothing.
"""

from __future__ import annotations

import re
import uuid

from django.db import models

from agent.fields import RedactedCharField, RedactedJSONField, RedactedTextField


class AgentSession(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    title = RedactedCharField(max_length=200, blank=True)
    # The operator who started it, `agent:hermes` for proactive sessions, `peer:<name>` for peers.
    actor = models.CharField(max_length=150)
    # Where the session was opened: cli, api, ui, mcp, a2a. Informational only.
    origin = models.CharField(max_length=20, blank=True)
    # The model the operator picked for this session; empty: the configured default (HERMES_MODEL).
    model = models.CharField(max_length=100, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_active_at = models.DateTimeField(auto_now_add=True)
    # The context in use: the tokens of the session's last model request plus its answer (what the
    # next request starts from), and the window of the model it was sent to.
    context_tokens = models.PositiveIntegerField(default=0)
    context_window = models.PositiveIntegerField(default=0)
    # Compaction (agent/engine/compaction.py): how often and when last; tool results in messages up
    # to this id reach the model cleared (the database keeps them whole).
    compactions = models.PositiveIntegerField(default=0)
    compacted_at = models.DateTimeField(null=True, blank=True)
    tool_results_cleared_through = models.BigIntegerField(null=True, blank=True)

    class Meta:
        db_table = "agent_sessions"
        verbose_name = "session"
        ordering = ["-last_active_at"]
        indexes = [models.Index(fields=["-last_active_at"], name="agent_sess_last_active_idx")]

    def __str__(self) -> str:
        return self.title or str(self.id)


class DatabaseProbe(models.Model):
    """The one row `/healthz` writes (agent/health.py): a database that answers reads but refuses
    writes (a disk full, a file system gone read-only, a read-only replica) is not working."""

    id = models.PositiveSmallIntegerField(primary_key=True)
    written_at = models.DateTimeField()

    class Meta:
        db_table = "agent_database_probe"

    def __str__(self) -> str:
        return f"database probe written {self.written_at:%Y-%m-%d %H:%M:%S}"


class Instance(models.Model):
    """A running Hermes process (a Daphne server, `ask`, `mcp_serve`, ...): the owner of its turns.

    A turn whose owner is gone is interrupted at once by whoever next looks (a new question in its
    session, Stop, a process starting), instead of after a timeout. How "gone" is decided is
    `agent.presence`'s job: the row says who the process is and when it last said it was alive.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # web, ask, mcp_serve, ...: what the process is for (shown to operators, not used in decisions).
    role = models.CharField(max_length=40)
    # Where the process runs (hostname and kernel boot id) and which process it is there (pid and
    # its start time, so a pid reused after a restart is not taken for the old process).
    host = models.CharField(max_length=200)
    pid = models.PositiveIntegerField()
    pid_started = models.CharField(max_length=40, blank=True)
    # PostgreSQL only: the session-level advisory lock the process holds while it lives.
    lock_key = models.BigIntegerField(null=True, blank=True)
    started_at = models.DateTimeField(auto_now_add=True)
    # Set by a clean shutdown; its turns were interrupted by the process itself.
    stopped_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "agent_instances"
        verbose_name = "Hermes process"
        ordering = ["-started_at"]

    def __str__(self) -> str:
        return f"{self.role} pid {self.pid} on {self.host.split('/')[0]}"


class Turn(models.Model):
    class Status(models.TextChoices):
        RUNNING = "running"
        DONE = "done"
        ERROR = "error"
        CANCELLED = "cancelled"
        # The process running the turn stopped (shut down, or died) before the turn finished.
        INTERRUPTED = "interrupted"

    # The turn id is the correlation id: every tool call of the turn is logged under it.
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    session = models.ForeignKey(AgentSession, on_delete=models.CASCADE, related_name="turns")
    actor = models.CharField(max_length=150)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.RUNNING)
    stop_reason = models.CharField(max_length=40, blank=True)
    error = RedactedTextField(blank=True)
    # The model that answered: the session's pick when the turn began, else the default.
    model = models.CharField(max_length=100, blank=True)
    # {"input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"}
    usage = models.JSONField(default=dict)
    # Derived from `usage` (and `model`'s price) whenever it is written, so that a day's spend is a
    # cheap sum (agent/budget.py): every token reported, and the list price in USD (null: unknown).
    tokens_total = models.PositiveBigIntegerField(default=0)
    cost_usd = models.DecimalField(max_digits=12, decimal_places=6, null=True, blank=True)
    # The tokens set aside for the turn when it was admitted (agent/budget.py `turn_admit`): while
    # the turn runs, a day's spend counts the larger of this and `tokens_total`, so turns running
    # at once cannot all start on the same room. Once the turn ends only `tokens_total` counts.
    tokens_reserved = models.PositiveBigIntegerField(default=0)
    iterations = models.PositiveIntegerField(default=0)
    started_at = models.DateTimeField(auto_now_add=True)
    # The process running the turn (`Instance.id`); empty for turns older than ownership.
    owner = models.UUIDField(null=True, blank=True)
    # Touched while the turn runs. Turns without an owner fall back on it: a running turn whose
    # heartbeat stopped belongs to a dead process.
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # The operators' notes the turn was given (agent/memory/recall.py): [{"id", "title", "runbook"}].
    notes_given = RedactedJSONField(default=list, blank=True)

    class Meta:
        db_table = "agent_turns"
        ordering = ["started_at"]
        indexes = [
            models.Index(fields=["session", "started_at"], name="agent_turn_session_idx"),
            models.Index(fields=["status"], name="agent_turn_status_idx"),
            # Today's spend sums the turns started since midnight.
            models.Index(fields=["started_at"], name="agent_turn_started_idx"),
        ]

    def __str__(self) -> str:
        return f"turn {self.id}"

    @property
    def correlation_id(self) -> uuid.UUID:
        return self.id


class Message(models.Model):
    class Role(models.TextChoices):
        USER = "user"
        ASSISTANT = "assistant"

    class Kind(models.TextChoices):
        MESSAGE = "", "message"
        # The model's summary of the messages up to `replaces_through`: the model is sent the
        # latest summary instead of them; people still see every message.
        SUMMARY = "summary", "summary for the model"

    session = models.ForeignKey(AgentSession, on_delete=models.CASCADE, related_name="messages")
    turn = models.ForeignKey(Turn, on_delete=models.CASCADE, related_name="messages", null=True, blank=True)
    role = models.CharField(max_length=10, choices=Role.choices)
    # A list of Anthropic content blocks (text, thinking with its signature, tool_use, tool_result,
    # image), replayed verbatim (the thinking of settled turns is left out, `engine.thinking`).
    content = RedactedJSONField()
    kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.MESSAGE, blank=True)
    # For a summary: the id of the last message it replaces.
    replaces_through = models.BigIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "agent_messages"
        ordering = ["id"]
        indexes = [models.Index(fields=["session", "id"], name="agent_msg_session_idx")]

    def __str__(self) -> str:
        return f"{self.role} message {self.pk}"


class Activity(models.Model):
    """One tool call: the ledger the operator audits by correlation id.

    `state` is the call's life: `started` (written before the call is sent; left so by a crash),
    then `ok` or `error` (the tool answered), or `unknown` — the call was in flight when it was cut
    off (Stop, a time limit, an MCP timeout or lost connection, a crash found afterwards), so it may
    have run. `is_error` keeps its meaning for API consumers: the model was given an error result
    (`error` and `unknown` rows).
    """

    class State(models.TextChoices):
        STARTED = "started", "in flight"
        OK = "ok", "ok"
        ERROR = "error", "error"
        UNKNOWN = "unknown", "outcome unknown"

    correlation_id = models.UUIDField()
    session = models.ForeignKey(AgentSession, on_delete=models.SET_NULL, related_name="activity", null=True, blank=True)
    actor = models.CharField(max_length=150)
    # The tool_use block's id, which joins a ledger row to the conversation.
    tool_use_id = models.CharField(max_length=100, blank=True)
    server = models.CharField(max_length=100)
    tool = models.CharField(max_length=200)
    arguments = RedactedJSONField(default=dict)
    # The result as the tool returned it, stored once and capped at HERMES_LEDGER_RESULT_MAX_BYTES
    # (`agent.conversation.results.tool_result_record`); `{}` while the call is in flight.
    result = RedactedJSONField(default=dict)
    state = models.CharField(max_length=10, choices=State.choices, default=State.OK)
    is_error = models.BooleanField(default=False)
    duration_ms = models.PositiveIntegerField(default=0)
    started_at = models.DateTimeField()

    class Meta:
        db_table = "agent_activity"
        verbose_name = "tool call"
        verbose_name_plural = "activity (tool-call ledger)"
        ordering = ["-started_at", "-id"]
        indexes = [
            models.Index(fields=["correlation_id"], name="agent_act_corr_idx"),
            # The ledger's order, and its keyset pages' cursor (controlroom.selectors.ledger_page).
            models.Index(fields=["-started_at", "-id"], name="agent_act_started_id_idx"),
            # The filter menus walk these from one distinct value to the next.
            models.Index(fields=["tool"], name="agent_act_tool_idx"),
            models.Index(fields=["server"], name="agent_act_server_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.server}/{self.tool} @ {self.started_at:%Y-%m-%d %H:%M:%S}"


class ToolCatalog(models.Model):
    """The last tool list an MCP server answered, so its tools stay defined while it is unreachable.

    One row per configured server, rewritten when a listing differs from it. A process that starts
    while Oikos is down reads it instead of offering the model no tools (which the API refuses in a
    conversation holding tool calls). `target` is the server's URL or command line when listed: a
    list from another target is not this server's.
    """

    server = models.CharField(max_length=100, unique=True)
    target = RedactedTextField()
    # [{"tool", "description", "input_schema", "read_only"}], as offered to the model.
    tools = RedactedJSONField(default=list)
    listed_at = models.DateTimeField()

    class Meta:
        db_table = "agent_tool_catalog"
        verbose_name = "tool catalog"

    def __str__(self) -> str:
        return f"{self.server}: {len(self.tools)} tools"


class Elicitation(models.Model):
    """A question an MCP server asked during a tool call (MCP elicitation), and its answer.

    Kept while it waits so any page (any process, after a reload) can show and answer it; the
    engine of the turn that caused it waits for the answer (`agent.elicitation.store`). The request and
    the answer are also in the ledger (`activity`), under the turn's correlation id.
    """

    class Status(models.TextChoices):
        PENDING = "pending", "waiting for an answer"
        ACCEPTED = "accept", "accepted"
        DECLINED = "decline", "declined"
        CANCELLED = "cancel", "cancelled"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    correlation_id = models.UUIDField()
    session = models.ForeignKey(
        AgentSession, on_delete=models.SET_NULL, related_name="elicitations", null=True, blank=True
    )
    actor = models.CharField(max_length=150)
    activity = models.ForeignKey(Activity, on_delete=models.SET_NULL, related_name="+", null=True, blank=True)
    tool_use_id = models.CharField(max_length=100, blank=True)
    server = models.CharField(max_length=100)
    tool = models.CharField(max_length=200, blank=True)
    message = RedactedTextField()
    requested_schema = RedactedJSONField(default=dict)
    # The schema's fields as Hermes parsed them (`agent.elicitation.types.ElicitField.to_dict`).
    fields = RedactedJSONField(default=list)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    content = RedactedJSONField(null=True, blank=True)
    # Why, when nobody chose the answer (a timeout, no operator in the turn, a form Hermes cannot show).
    reason = RedactedTextField(blank=True)
    # `form`: a server's question; `confirmation`: Hermes asks before running an execution whose
    # instruction may come from text it does not trust (`agent.engine.actions`).
    purpose = models.CharField(max_length=20, default="form", blank=True)
    answered_by = models.CharField(max_length=150, blank=True)
    created_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    answered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "agent_elicitations"
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["status", "-created_at"], name="agent_elicit_status_idx"),
            models.Index(fields=["correlation_id"], name="agent_elicit_corr_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.server} asks ({self.get_status_display()})"


class SearchEntry(models.Model):
    """One searchable thing an operator may look for later: a question, an answer, or a tool call.

    Written beside the row it indexes (`agent.search.search_index_*`, called from the services), from
    the text as stored — redacted, so a secret never reaches the index. The full-text index itself
    is the database's: on PostgreSQL a stored `document` tsvector column with a GIN index, on SQLite
    the FTS5 table `agent_search_fts` kept in step by triggers (both made by migration 0009, outside
    the ORM: Django knows neither).
    """

    class Kind(models.TextChoices):
        QUESTION = "question"
        ANSWER = "answer"
        # Its tool name, arguments and (once the call ends) its result.
        TOOL = "tool", "tool call"

    # Deleted with its session. The rows it indexes are named by id only: a foreign key each would
    # add an index to maintain on every write for deletions that only ever happen by session.
    session = models.ForeignKey(AgentSession, on_delete=models.CASCADE, related_name="+")
    turn_id = models.UUIDField(null=True, blank=True)
    message_id = models.BigIntegerField(null=True, blank=True)
    activity_id = models.BigIntegerField(null=True, blank=True)
    kind = models.CharField(max_length=10, choices=Kind.choices)
    # For a tool call: its server and tool, for the filter.
    server = models.CharField(max_length=100, blank=True)
    tool = models.CharField(max_length=200, blank=True)
    # The block's id for a tool call, so a hit can open its chip in the transcript.
    tool_use_id = models.CharField(max_length=100, blank=True)
    text = RedactedTextField()
    created_at = models.DateTimeField()

    class Meta:
        db_table = "agent_search_entries"
        verbose_name = "search entry"
        verbose_name_plural = "search entries"
        indexes = [
            models.Index(fields=["activity_id"], name="agent_search_activity_idx"),
            models.Index(fields=["created_at"], name="agent_search_created_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} of session {self.session_id}"


class Proposal(models.Model):
    """An execution a turn that may not act proposed (a peer's, an investigation's), for an operator.

    Nothing reaches Oikos while it is `pending`: only an operator's approval in Hermes sends the
    `request_execution` to Oikos, as that operator — even for actions Oikos would run on its own
    (`agent.proposals`). Exactly one decision wins (a conditional update on `pending`).
    """

    class Status(models.TextChoices):
        PENDING = "pending", "waiting for an operator"
        APPROVED = "approved"
        REJECTED = "rejected"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    correlation_id = models.UUIDField()
    session = models.ForeignKey(
        AgentSession, on_delete=models.SET_NULL, related_name="proposals", null=True, blank=True
    )
    # Who proposed it: `peer:<name>`, `agent:hermes`; and where its turn came from (a2a, signal, ...).
    proposed_by = models.CharField(max_length=150)
    origin = models.CharField(max_length=20, blank=True)
    tool_use_id = models.CharField(max_length=100, blank=True)
    server = models.CharField(max_length=100)
    tool = models.CharField(max_length=200)
    target = RedactedTextField(blank=True)
    # The model wrote it (checked against nothing until Oikos reads it).
    action = RedactedCharField(max_length=40, blank=True)
    arguments = RedactedJSONField(default=dict)
    # What the turn had read that it does not trust, where the proposal may have come from.
    sources = RedactedJSONField(default=list)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    decided_by = models.CharField(max_length=150, blank=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    # What Oikos answered when the approved request was sent (execution id and status, or the error).
    outcome = RedactedJSONField(default=dict)
    created_at = models.DateTimeField()

    class Meta:
        db_table = "agent_proposals"
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["status", "-created_at"], name="agent_proposal_status_idx")]

    def __str__(self) -> str:
        return f"{self.action} {self.target} proposed by {self.proposed_by} ({self.status})"


class McpCredential(models.Model):
    """What Hermes holds to authorize itself to one OAuth-protected MCP server (`agent.tools.oauth`).

    The client registration and the tokens are sealed (`agent.tools.oauth.sealing`): the database
    never holds a token or a client secret readable, and no page shows either. What the Servers page
    shows (issuer, scope, expiry) is kept beside them, redacted like any text from outside.
    Credentials belong to the URL they were obtained for: a server configured at another URL starts
    over rather than presenting them elsewhere.
    """

    server = models.CharField(max_length=100, unique=True)
    server_url = models.CharField(max_length=2000)
    grant = models.CharField(max_length=30)
    client_sealed = models.TextField(blank=True)
    tokens_sealed = models.TextField(blank=True)
    issuer = RedactedTextField(blank=True)
    scope = RedactedTextField(blank=True)
    # When the access token stops being valid (None: it did not say); the SDK refreshes it then.
    expires_at = models.DateTimeField(null=True, blank=True)
    refreshable = models.BooleanField(default=False)
    # The operator who connected it (authorization code), empty for a service account.
    connected_by = models.CharField(max_length=150, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "agent_mcp_credentials"

    def __str__(self) -> str:
        return f"OAuth credentials for {self.server}"


class McpAuthorization(models.Model):
    """An authorization an operator started from the Servers page, until its callback arrives.

    The row carries the request's `state` only as a digest and never the PKCE verifier: the SDK's
    flow keeps that in the process that started it, which finishes the exchange when the callback
    comes (`agent.tools.oauth.connect`). A callback that finds no flow waiting (Hermes restarted)
    ends the row `expired`, and the page says to connect again.
    """

    class Status(models.TextChoices):
        PENDING = "pending", "waiting for the authorization server"
        CONNECTED = "connected"
        FAILED = "failed"
        EXPIRED = "expired"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    server = models.CharField(max_length=100)
    state_digest = models.CharField(max_length=64, unique=True)
    started_by = models.CharField(max_length=150)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    error = RedactedTextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "agent_mcp_authorizations"
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"authorization of {self.server} ({self.status})"


class Change(models.Model):
    """One execution Hermes asked Oikos for: the record behind follow-ups, undo and "what changed?".

    Written when Oikos answers a `request_execution` with an execution id — from a turn that may act
    (`agent.engine.tool_round`) or from an operator's approval of a proposal (`oikos.proposals`) — and
    kept current from Oikos's event stream (`execution.*`, `approval.*`). Nothing here is Oikos's
    word on anything but the execution's status; the verdict is Hermes's own, from a follow-up turn
    that re-read the target after the execution finished (`watch.followups`).

    The follow-up is claimed exactly once across processes: a conditional update from `pending`
    (`agent.store.changes.followup_claim`), as watched events are claimed by a unique row.
    """

    class FollowUp(models.TextChoices):
        PENDING = "pending", "waiting for the execution to finish"
        CLAIMED = "claimed", "a watcher is checking"
        DONE = "done", "checked"
        SKIPPED = "skipped", "not checked"

    class Verdict(models.TextChoices):
        CLEARED = "cleared"
        NOT_CLEARED = "not_cleared", "not cleared"
        FAILED = "failed"

    execution_id = models.CharField(max_length=100, unique=True)
    approval_id = models.CharField(max_length=100, blank=True)
    action = RedactedCharField(max_length=40, blank=True)
    target = RedactedCharField(max_length=200, blank=True)
    params = RedactedJSONField(default=dict)
    # The reason the request gave Oikos (the model's, or the proposal's with who approved it).
    reason = RedactedTextField(blank=True)
    risk_class = RedactedCharField(max_length=40, blank=True)
    # Where it was asked: the session, the turn (correlation id) and its ledger row; who asked.
    session = models.ForeignKey(AgentSession, on_delete=models.SET_NULL, related_name="changes", null=True, blank=True)
    correlation_id = models.UUIDField(null=True, blank=True)
    activity_id = models.BigIntegerField(null=True, blank=True)
    proposal_id = models.UUIDField(null=True, blank=True)
    asked_by = models.CharField(max_length=150, blank=True)
    requested_at = models.DateTimeField()
    # Oikos's status of the execution (`proposed`, `approved`, `running`, `completed`, `failed`,
    # `denied`, `expired`, …) as last heard, who decided its approval, and how it ended.
    status = RedactedCharField(max_length=20, blank=True)
    decided_by = RedactedCharField(max_length=150, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    error = RedactedTextField(blank=True)
    # The follow-up: its state, the watcher that claimed it, the turn that checked, and why it did
    # not run when it was skipped.
    followup = models.CharField(max_length=10, choices=FollowUp.choices, default=FollowUp.PENDING)
    followup_by = models.UUIDField(null=True, blank=True)
    followup_claimed_at = models.DateTimeField(null=True, blank=True)
    followup_turn = models.ForeignKey(Turn, on_delete=models.SET_NULL, related_name="+", null=True, blank=True)
    followup_note = RedactedTextField(blank=True)
    verdict = models.CharField(max_length=12, choices=Verdict.choices, blank=True)
    # The follow-up's one-line reading of the verdict ("sonarr healthy, probes green").
    verdict_detail = RedactedTextField(blank=True)
    verdict_at = models.DateTimeField(null=True, blank=True)
    # The way back: the proposal offering the inverse, and, on the inverse's own row, what it undoes.
    undo_proposal_id = models.UUIDField(null=True, blank=True)
    undo_of = models.ForeignKey("self", on_delete=models.SET_NULL, related_name="undone_by", null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "agent_changes"
        ordering = ["-requested_at", "-id"]
        indexes = [
            models.Index(fields=["-requested_at", "-id"], name="agent_change_requested_idx"),
            models.Index(fields=["target", "-requested_at"], name="agent_change_target_idx"),
            models.Index(fields=["followup"], name="agent_change_followup_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.action} {self.target} ({self.execution_id})"


_NOTE_TITLE_CHARS = 80
_HEADING = re.compile(r"^\s*#+\s*")
_EMPHASIS = re.compile(r"\*\*|__|`")


def note_title(text: str) -> str:
    """A note's first non-empty line, without Markdown's heading and emphasis marks, cut to a title."""
    for line in str(text or "").splitlines():
        line = _EMPHASIS.sub("", _HEADING.sub("", line)).strip()
        if line:
            return line if len(line) <= _NOTE_TITLE_CHARS else line[: _NOTE_TITLE_CHARS - 1] + "…"
    return "(empty note)"


class Note(models.Model):
    """What an operator taught Hermes about the homelab: a fact, or a runbook to follow.

    Scoped to entities (slugs such as `service:sonarr`, or globs such as `lxc:media-*`; `*` for
    every question) and tags (words, signal kinds such as `http_timeout`); a note with neither is
    recalled by the words it shares with the question (agent/memory/recall.py). Kept in Hermes's
    database, never written into Oikos. The number (`[note 12]`) is how the model cites it.
    """

    text = RedactedTextField()
    entities = RedactedJSONField(default=list, blank=True)
    tags = RedactedJSONField(default=list, blank=True)
    # A procedure: given to the model as the way to handle its entities or signal kinds.
    runbook = models.BooleanField(default=False)
    # An inactive note is kept (and listed) but never recalled.
    active = models.BooleanField(default=True)
    author = models.CharField(max_length=150)
    updated_by = models.CharField(max_length=150, blank=True)
    # The conversation it came from ("remember that …"), when it came from one.
    source_session = models.ForeignKey(
        AgentSession, on_delete=models.SET_NULL, null=True, blank=True, related_name="notes_taught"
    )
    source_turn = models.UUIDField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "agent_notes"
        ordering = ["-updated_at", "-id"]
        indexes = [models.Index(fields=["active", "-updated_at"], name="agent_note_active_idx")]

    def __str__(self) -> str:
        return f"note {self.pk}: {self.title}"

    @property
    def title(self) -> str:
        return note_title(self.text)


class NoteProposal(models.Model):
    """A note the model proposed in a conversation ("remember that …"), until an operator saves it.

    Nothing is a note before the click: an operator saves (the `Note` is created, with the session
    as its source) or dismisses it, and exactly one decision wins (a conditional update on `pending`).
    """

    class Status(models.TextChoices):
        PENDING = "pending", "waiting for an operator"
        SAVED = "saved"
        DISMISSED = "dismissed"

    session = models.ForeignKey(
        AgentSession, on_delete=models.SET_NULL, null=True, blank=True, related_name="note_proposals"
    )
    turn_id = models.UUIDField(null=True, blank=True)
    tool_use_id = models.CharField(max_length=100, blank=True)
    # Who was talking when the model proposed it (the operator, or `agent:hermes`).
    proposed_by = models.CharField(max_length=150)
    text = RedactedTextField()
    entities = RedactedJSONField(default=list, blank=True)
    tags = RedactedJSONField(default=list, blank=True)
    runbook = models.BooleanField(default=False)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    decided_by = models.CharField(max_length=150, blank=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    note = models.OneToOneField(Note, on_delete=models.SET_NULL, null=True, blank=True, related_name="proposal")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "agent_note_proposals"
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["status", "-created_at"], name="agent_note_prop_status_idx")]

    def __str__(self) -> str:
        return f"note proposal {self.pk} ({self.status})"
