"""The A2A SDK's task store, on Hermes's database: tasks survive restarts and every Hermes process
behind a proxy sees the same ones. Each task belongs to the peer that created it (the owner is the
authenticated peer's name), and no peer sees another's.
"""

from __future__ import annotations

from a2a.server.context import ServerCallContext
from a2a.server.tasks import TaskStore
from a2a.types import ListTasksRequest, ListTasksResponse, Task, TaskState
from a2a.utils.constants import DEFAULT_LIST_TASKS_PAGE_SIZE, MAX_LIST_TASKS_PAGE_SIZE
from channels.db import database_sync_to_async
from google.protobuf.json_format import MessageToDict, ParseDict

from interop.models import A2ATask


def _owner(context: ServerCallContext) -> str:
    return context.user.user_name


def _task(data: dict) -> Task:
    return ParseDict(data, Task(), ignore_unknown_fields=True)


class DatabaseTaskStore(TaskStore):
    async def save(self, task: Task, context: ServerCallContext) -> None:
        data = MessageToDict(task)
        await database_sync_to_async(A2ATask.objects.update_or_create)(
            id=task.id,
            defaults={
                "owner": _owner(context),
                "context_id": task.context_id,
                "state": TaskState.Name(task.status.state),
                "data": data,
            },
        )

    async def get(self, task_id: str, context: ServerCallContext) -> Task | None:
        row = await database_sync_to_async(A2ATask.objects.filter(id=task_id, owner=_owner(context)).first)()
        return _task(row.data) if row else None

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        return await database_sync_to_async(self._list)(params, _owner(context))

    def _list(self, params: ListTasksRequest, owner: str) -> ListTasksResponse:
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

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        await database_sync_to_async(A2ATask.objects.filter(id=task_id, owner=_owner(context)).delete)()
