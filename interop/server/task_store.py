"""The A2A SDK's task store and event stream, on Hermes's database: tasks survive restarts and every
Hermes process behind a proxy sees the same ones. Each task belongs to the peer that created it (the
owner is the authenticated peer's name), and no peer sees another's.

Why a *versioned* store (the SDK's cluster mode): a task is written by the process that runs its
turn, and may be cancelled from any other one. Every write bumps the task's version and a writer
holding an older version loses (`ConcurrentTaskModificationError`); the SDK then re-reads the task
and, finding it terminal, stops its executor. So a task cancelled on process B never flips to
COMPLETED when the turn on process A ends a moment later, and terminal tasks stay immutable.

A task is created by `HermesExecutor` once its Hermes turn has started, and names that turn in its
metadata (`hermes_turn_id`): the first write records the turn, so a cancel from any process finds
it at once. Each peer keeps its newest `HERMES_A2A_PEER_KEEP` tasks; older terminal ones are
deleted as new ones are created. The stored JSON is redacted (`agent.fields.RedactedJSONField`).

Tasks whose Hermes turn stopped without them (the process died, the turn was stopped in the control
room) are settled when read: the task is written terminal (CANCELED, or FAILED saying why) with a
new version, so GetTask, ListTasks and SubscribeToTask all see the end instead of WORKING forever.

`DatabaseTaskEventStream` lets SubscribeToTask follow a task running in another process: it polls
the task's row (like the SDK's own database event stream) and yields what each new version changed
(text appended to the answer, a new status), as the owner's stream would.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncGenerator

from a2a.server.cluster import ConcurrentTaskModificationError, StoredTask, TaskVersion, VersionedTaskStore
from a2a.server.cluster.event_stream import TaskEventStream, VersionedEvent
from a2a.server.context import ServerCallContext
from a2a.server.events.event_queue import Event
from a2a.types import (
    ListTasksRequest,
    ListTasksResponse,
    Message,
    Part,
    Role,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatusUpdateEvent,
)
from a2a.utils.constants import DEFAULT_LIST_TASKS_PAGE_SIZE, MAX_LIST_TASKS_PAGE_SIZE
from channels.db import database_sync_to_async
from django.db import IntegrityError, transaction
from google.protobuf.json_format import MessageToDict, ParseDict
from google.protobuf.timestamp_pb2 import Timestamp

from agent.models import Turn
from interop.config import A2AConfig
from interop.models import A2ATask
from interop.server.conversation import PEER_CANCEL_REASON

POLL_SECONDS = 0.5
# The task metadata key naming the Hermes turn that answers the task.
TASK_TURN_KEY = "hermes_turn_id"
TERMINAL = {
    TaskState.TASK_STATE_COMPLETED,
    TaskState.TASK_STATE_CANCELED,
    TaskState.TASK_STATE_FAILED,
    TaskState.TASK_STATE_REJECTED,
}
TERMINAL_NAMES = {TaskState.Name(state) for state in TERMINAL}
# What a task reads as once its turn stopped without it: (state, what the peer is told).
SETTLED_BY_TURN = {
    # The turn's own reason (the operator's Stop, or the peer's cancel), as the task's owner reports it.
    Turn.Status.CANCELLED: (TaskState.TASK_STATE_CANCELED, "{error}"),
    Turn.Status.INTERRUPTED: (
        TaskState.TASK_STATE_FAILED,
        "The Hermes process answering this task stopped before it finished; send the message again.",
    ),
    Turn.Status.ERROR: (TaskState.TASK_STATE_FAILED, "Hermes could not answer: {error}"),
}

_UNSAID = {TaskState.TASK_STATE_CANCELED: "Cancelled.", TaskState.TASK_STATE_FAILED: "the turn failed"}


def _owner(context: ServerCallContext) -> str:
    return context.user.user_name


def _task(data: dict) -> Task:
    return ParseDict(data, Task(), ignore_unknown_fields=True)


def _version(value: TaskVersion) -> int:
    """The stored counter behind a version (MISSING, a first write, is 0)."""
    raw = value._value  # the SDK's own stores read it the same way
    if not isinstance(raw, int):
        raise TypeError(f"task versions are integers here, not {type(raw).__name__}")
    return raw


# --- writes (synchronous, transactional) -----------------------------------------------------------


def task_save(*, task: Task, owner: str, prev_version: int) -> int:
    """Store `task` if nobody wrote it since `prev_version`; returns the new version.

    Raises `ConcurrentTaskModificationError` when another writer got there first — and, for a write
    moving the task to CANCELED, when the task is already terminal (the SDK's contract: a cancel
    overwrites any live task, never an ended one).
    """
    state = TaskState.Name(task.status.state)
    try:
        with transaction.atomic():
            row = A2ATask.objects.select_for_update().filter(id=task.id).first()
            if row is not None and row.owner != owner:
                raise ConcurrentTaskModificationError(task.id)
            if task.status.state == TaskState.TASK_STATE_CANCELED:
                if row is None or row.state in TERMINAL_NAMES:
                    raise ConcurrentTaskModificationError(task.id)
                _cancel_reason_give(task, stored=row.data)
            elif (row.version if row is not None else 0) != prev_version:
                raise ConcurrentTaskModificationError(task.id)
            data = MessageToDict(task)
            if row is None:
                A2ATask.objects.create(
                    id=task.id,
                    owner=owner,
                    context_id=task.context_id,
                    state=state,
                    data=data,
                    version=1,
                    turn_id=_turn_named(data),
                )
                _tasks_bound(owner=owner, keep=A2AConfig.from_settings().peer_keep)
                return 1
            row.context_id, row.state, row.data = task.context_id, state, data
            row.version += 1
            row.save(update_fields=["context_id", "state", "data", "version", "updated_at"])
            return row.version
    except IntegrityError:
        # Two first writes of one task id: the second loses, like a stale version.
        raise ConcurrentTaskModificationError(task.id) from None


def _cancel_reason_give(task: Task, *, stored: dict) -> None:
    """A cancel written from another process (the SDK copies the live task and flips its state) still
    carries the task's last working message ("Calling the tool …"): it gets the peer's cancel reason
    instead, the one every other path gives. The SDK answers CancelTask with this same object."""
    carried = (stored.get("status") or {}).get("message", {}).get("messageId")
    if task.status.HasField("message") and task.status.message.message_id != carried:
        return
    message = Message(
        role=Role.ROLE_AGENT,
        message_id=uuid.uuid4().hex,
        task_id=task.id,
        context_id=task.context_id,
        parts=[Part(text=PEER_CANCEL_REASON)],
    )
    task.status.message.CopyFrom(message)


def _turn_named(data: dict) -> uuid.UUID | None:
    """The Hermes turn a new task names in its metadata (set by `HermesExecutor`), if it exists."""
    value = (data.get("metadata") or {}).get(TASK_TURN_KEY)
    try:
        turn_id = uuid.UUID(str(value)) if value else None
    except ValueError:
        return None
    return turn_id if turn_id is not None and Turn.objects.filter(pk=turn_id).exists() else None


def _tasks_bound(*, owner: str, keep: int) -> None:
    """Delete `owner`'s terminal tasks older than its newest `keep`: a peer's tasks are bounded."""
    beyond = A2ATask.objects.filter(owner=owner).order_by("-updated_at", "-id").values_list("pk", "state")[keep:]
    stale = [pk for pk, state in beyond if state in TERMINAL_NAMES]
    if stale:
        A2ATask.objects.filter(pk__in=stale).delete()


def task_turn_attach(*, task_id: str, turn_id: uuid.UUID) -> str | None:
    """Record the Hermes turn answering a task; returns the task's state name (None: not stored yet).

    Called once the turn runs, so that a cancel from any process finds the turn to stop; if the task
    was cancelled before this, the caller stops the turn itself.
    """
    with transaction.atomic():
        row = A2ATask.objects.select_for_update().filter(id=task_id).first()
        if row is None:
            return None
        row.turn_id = turn_id
        row.save(update_fields=["turn", "updated_at"])
        return row.state


def tasks_settle(*, task_id: str | None = None, owner: str | None = None) -> int:
    """Write terminal the live tasks (of `owner`, or `task_id`) whose Hermes turn stopped; returns how
    many. A new version, so a writer still holding the task loses to this."""
    open_rows = A2ATask.objects.exclude(state__in=TERMINAL_NAMES).filter(turn__status__in=list(SETTLED_BY_TURN))
    if task_id is not None:
        open_rows = open_rows.filter(id=task_id)
    if owner is not None:
        open_rows = open_rows.filter(owner=owner)
    if not open_rows.exists():  # the common case: one cheap read, no lock
        return 0
    settled = 0
    with transaction.atomic():
        for row in open_rows.select_for_update(of=("self",)).select_related("turn"):
            assert row.turn is not None
            state, text = SETTLED_BY_TURN[Turn.Status(row.turn.status)]
            task = _task(row.data)
            metadata = {"hermes_session_id": str(row.turn.session_id), "hermes_turn_id": str(row.turn.pk)}
            message = Message(
                role=Role.ROLE_AGENT,
                message_id=uuid.uuid4().hex,
                task_id=task.id,
                context_id=task.context_id,
                parts=[Part(text=text.format(error=row.turn.error or _UNSAID[state]))],
            )
            message.metadata.update(metadata)
            if task.status.HasField("message"):
                task.history.append(task.status.message)
            task.status.state = state
            task.status.message.CopyFrom(message)
            timestamp = Timestamp()
            timestamp.GetCurrentTime()
            task.status.timestamp.CopyFrom(timestamp)
            row.state, row.data = TaskState.Name(state), MessageToDict(task)
            row.version += 1
            row.save(update_fields=["state", "data", "version", "updated_at"])
            settled += 1
    return settled


# --- reads -----------------------------------------------------------------------------------------


def task_stored(*, task_id: str, owner: str | None) -> StoredTask | None:
    """The task with its version, settled first; `owner=None` reads any peer's (the event stream,
    whose caller the handler already checked)."""
    tasks_settle(task_id=task_id)
    rows = A2ATask.objects.filter(id=task_id)
    if owner is not None:
        rows = rows.filter(owner=owner)
    row = rows.first()
    return StoredTask(_task(row.data), TaskVersion(row.version)) if row else None


def task_turn_id(*, task_id: str) -> uuid.UUID | None:
    """The Hermes turn behind a task, once its turn started."""
    return A2ATask.objects.filter(id=task_id).values_list("turn_id", flat=True).first()


def tasks_list(*, params: ListTasksRequest, owner: str) -> ListTasksResponse:
    tasks_settle(owner=owner)
    rows = A2ATask.objects.filter(owner=owner)
    if params.context_id:
        rows = rows.filter(context_id=params.context_id)
    if params.status:
        rows = rows.filter(state=TaskState.Name(params.status))
    total = rows.count()
    size = min(params.page_size or DEFAULT_LIST_TASKS_PAGE_SIZE, MAX_LIST_TASKS_PAGE_SIZE)
    start = int(params.page_token) if params.page_token.isdigit() else 0
    page = list(rows.order_by("-updated_at", "id")[start : start + size])
    following = str(start + size) if start + size < total else None
    return ListTasksResponse(
        tasks=[_task(row.data) for row in page], next_page_token=following, page_size=size, total_size=total
    )


# --- the SDK's interfaces --------------------------------------------------------------------------


class DatabaseTaskStore(VersionedTaskStore):
    async def save(
        self,
        task: Task,
        *,
        event: Event | None,
        prev: Task | None,
        prev_version: TaskVersion,
        context: ServerCallContext,
    ) -> TaskVersion:
        version = await database_sync_to_async(task_save)(
            task=task, owner=_owner(context), prev_version=_version(prev_version)
        )
        return TaskVersion(version)

    async def get(self, task_id: str, context: ServerCallContext) -> StoredTask | None:
        if "\x00" in task_id:
            return None  # never a stored id, and PostgreSQL refuses a NUL in a query
        return await database_sync_to_async(task_stored)(task_id=task_id, owner=_owner(context))

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        return await database_sync_to_async(tasks_list)(params=params, owner=_owner(context))

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        if "\x00" in task_id:
            return
        await database_sync_to_async(A2ATask.objects.filter(id=task_id, owner=_owner(context)).delete)()


class DatabaseTaskEventStream(TaskEventStream):
    """Follows a task that another process runs, by polling its row until it is terminal (or gone).
    Nothing is published: the row is the stream.

    Each new version is told as what changed since the one before, as the owner's own stream tells
    it: text appended to an artifact as an artifact update with `append`, a replaced or new artifact
    whole, a new status as a status update. (The first version read, when it is already past the
    subscriber's snapshot, is sent as the task itself.)"""

    def __init__(self, *, poll_seconds: float = POLL_SECONDS) -> None:
        self.poll_seconds = poll_seconds

    async def publish(self, task_id: str, event: VersionedEvent) -> None:
        del task_id, event

    async def subscribe(self, task_id: str, *, after: TaskVersion) -> AsyncGenerator[VersionedEvent, None]:
        last = after
        previous: Task | None = None
        while True:
            stored = await database_sync_to_async(task_stored)(task_id=task_id, owner=None)
            if stored is None:
                return
            if stored.version.is_after(last):
                last = stored.version
                changes = [stored.task] if previous is None else task_changes(previous, stored.task)
                for event in changes:
                    yield VersionedEvent(event=event, version=stored.version)
                if stored.task.status.state in TERMINAL:
                    return
            previous = stored.task
            await asyncio.sleep(self.poll_seconds)

    async def destroy(self, task_id: str) -> None:
        del task_id


def task_changes(before: Task, after: Task) -> list[Event]:
    """The events that turn `before` into `after`: artifact updates, then a status update."""
    events: list[Event] = []
    known = {artifact.artifact_id: artifact for artifact in before.artifacts}
    for artifact in after.artifacts:
        old = known.get(artifact.artifact_id)
        if old is not None and old == artifact:
            continue
        update = TaskArtifactUpdateEvent(task_id=after.id, context_id=after.context_id)
        grown = (
            old is not None
            and len(artifact.parts) > len(old.parts)
            and list(artifact.parts[: len(old.parts)]) == list(old.parts)
        )
        update.artifact.CopyFrom(artifact)
        if grown:
            assert old is not None
            del update.artifact.parts[:]
            update.artifact.parts.extend(artifact.parts[len(old.parts) :])
            update.append = True
        # The answer's own artifact names its turn (`TaskStreamer.finish`); the chunks before it do not.
        update.last_chunk = after.status.state in TERMINAL or TASK_TURN_KEY in artifact.metadata
        events.append(update)
    if after.status != before.status:
        events.append(TaskStatusUpdateEvent(task_id=after.id, context_id=after.context_id, status=after.status))
    return events
