"""Small peer agents on loopback for the A2A client's tests.

- `FakeGarraPeer`: GarraIA's dialect (card + `POST /a2a/tasks`), answering from a script of
  `(text, status)` and recording every request (headers and body).
- `Served(app, name)`: any ASGI app on loopback, as a context manager.
- `redirector(target)`: answers every request with a redirect to `target`.
- `a2a_card_app(card)`: serves only an A2A agent card (to point a client somewhere else).
- `FakeAsyncA2APeer`: an A2A 1.0 peer that answers with a task still `working` and ends it later.
- `FakeStreamingA2APeer`: an A2A 1.0 peer on the `a2a-sdk` server that streams its answer.
- `FakeStreamingA2APeer(chunks, question=...)`: the same, but it first asks a question (`input-required`) and
  streams its answer once the question is answered.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections import deque
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self

from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.routes import create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Artifact,
    Message,
    Part,
    Role,
    SendMessageRequest,
    Task,
    TaskState,
    TaskStatus,
)
from a2a.utils.constants import TransportProtocol
from google.protobuf.json_format import MessageToDict, ParseDict
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.types import Message as Message_

from tests.fakes.loopback import LoopbackServer


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


class Served:
    """Any ASGI app on loopback, as a context manager."""

    def __init__(self, app: ASGIApp, name: str) -> None:
        self._server = LoopbackServer(app, name=name)
        self.url = ""

    def __enter__(self) -> Self:
        self.url = self._server.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self._server.stop()


class FakeGarraPeer(Served):
    def __init__(self) -> None:
        self.replies: deque[tuple[str, str]] = deque()
        self.seen: list[Seen] = []
        # GarraIA writes `agent`; `assistant` is what it also accepts.
        self.reply_role = "agent"
        super().__init__(
            Starlette(
                routes=[
                    Route("/.well-known/agent.json", self._card, methods=["GET"]),
                    Route("/a2a/tasks", self._task, methods=["POST"]),
                ]
            ),
            "fake-garraia",
        )

    def script(self, *replies: str | tuple[str, str]) -> None:
        for reply in replies:
            self.replies.append(reply if isinstance(reply, tuple) else (reply, "completed"))

    async def _card(self, request: Request) -> Response:
        self.seen.append(Seen("GET", request.url.path, dict(request.headers), None))
        return JSONResponse({"name": "garraia", "url": self.url, "version": "0.3.3", "capabilities": {}, "skills": []})

    async def _task(self, request: Request) -> Response:
        body = await request.json()
        self.seen.append(Seen("POST", request.url.path, dict(request.headers), body))
        text, status = self.replies.popleft() if self.replies else ("(script ran out)", "failed")
        user = body["message"]
        return JSONResponse(
            {
                "id": body.get("id") or "generated",
                "status": status,
                "messages": [user, {"role": self.reply_role, "parts": [{"type": "text", "text": text}]}],
                "artifacts": [{"name": "response", "parts": [{"type": "text", "text": text}], "index": 0}],
                "metadata": {},
            }
        )


def redirector(target: str) -> Starlette:
    async def redirect(request: Request) -> Response:
        return RedirectResponse(target + request.url.path, status_code=307)

    return Starlette(routes=[Route("/{path:path}", redirect, methods=["GET", "POST"])])


def a2a_card_app(card: dict[str, Any]) -> Starlette:
    async def serve(request: Request) -> Response:
        return JSONResponse(card)

    return Starlette(routes=[Route("/.well-known/agent-card.json", serve, methods=["GET"])])


# --- A2A 1.0 peers ---------------------------------------------------------------------------------


def a2a_peer_card(url: str, *, streaming: bool) -> AgentCard:
    return AgentCard(
        name="fake-a2a",
        description="A peer agent for Hermes's tests.",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(url=url + "/rpc", protocol_binding=TransportProtocol.JSONRPC, protocol_version="1.0")
        ],
        capabilities=AgentCapabilities(streaming=streaming),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="answer", name="Answer", description="Answers questions.", tags=["test"])],
    )


class FakeAsyncA2APeer(Served):
    """An A2A 1.0 peer over JSON-RPC that does not stream: `SendMessage` answers with the task still
    `working`, and `GetTask` reports it working `polls` more times before it ends in `final_state`
    with `answer` (an artifact when completed, else the status message: the question of an
    `input-required` task). `polls=None` keeps it working forever. Records the methods called."""

    def __init__(
        self, answer: str, *, polls: int | None = 2, final_state: TaskState = TaskState.TASK_STATE_COMPLETED
    ) -> None:
        self.answer = answer
        self.polls = polls
        self.final_state = final_state
        self.methods: list[str] = []
        self.tasks: dict[str, Task] = {}
        self._gets: dict[str, int] = {}
        super().__init__(
            Starlette(
                routes=[
                    Route("/.well-known/agent-card.json", self._card, methods=["GET"]),
                    Route("/rpc", self._rpc, methods=["POST"]),
                ]
            ),
            "fake-async-a2a",
        )

    async def _card(self, request: Request) -> Response:
        return JSONResponse(agent_card_to_dict(a2a_peer_card(self.url, streaming=False)))

    async def _rpc(self, request: Request) -> Response:
        body = await request.json()
        method, params = body["method"], body.get("params", {})
        self.methods.append(method)
        if method == "SendMessage":
            sent = ParseDict(params, SendMessageRequest()).message
            task = Task(
                id=uuid.uuid4().hex,
                context_id=sent.context_id or uuid.uuid4().hex,
                status=TaskStatus(state=TaskState.TASK_STATE_WORKING, message=self._said("Working on it.")),
                history=[sent],
            )
            self.tasks[task.id] = task
            self._gets[task.id] = 0
            return self._result(body, {"task": MessageToDict(task)})
        if method == "GetTask":
            task_id = params.get("id", "")
            if task_id not in self.tasks:
                return JSONResponse(
                    {"jsonrpc": "2.0", "id": body["id"], "error": {"code": -32001, "message": "no task"}}
                )
            self._gets[task_id] += 1
            task = self.tasks[task_id]
            if self.polls is not None and self._gets[task_id] > self.polls:
                self._finish(task)
            return self._result(body, MessageToDict(task))
        return JSONResponse({"jsonrpc": "2.0", "id": body["id"], "error": {"code": -32601, "message": "not found"}})

    def _finish(self, task: Task) -> None:
        if task.status.state == self.final_state:
            return
        if self.final_state == TaskState.TASK_STATE_COMPLETED:
            task.artifacts.append(Artifact(artifact_id="answer", parts=[Part(text=self.answer)]))
            task.status.CopyFrom(TaskStatus(state=self.final_state))
        else:
            task.status.CopyFrom(TaskStatus(state=self.final_state, message=self._said(self.answer)))

    @staticmethod
    def _said(text: str) -> Message:
        return Message(role=Role.ROLE_AGENT, message_id=uuid.uuid4().hex, parts=[Part(text=text)])

    @staticmethod
    def _result(body: dict[str, Any], result: dict[str, Any]) -> Response:
        return JSONResponse({"jsonrpc": "2.0", "id": body["id"], "result": result})


class _ChunkedAnswer(AgentExecutor):
    """Answers every message by streaming `chunks` as one artifact, then completing."""

    def __init__(self, chunks: list[str]) -> None:
        self.chunks = chunks

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        updater = TaskUpdater(event_queue, str(context.task_id), str(context.context_id))
        submitted = Task(
            id=str(context.task_id),
            context_id=str(context.context_id),
            status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
        )
        await event_queue.enqueue_event(submitted)
        await updater.start_work()
        for index, chunk in enumerate(self.chunks):
            await updater.add_artifact(
                [Part(text=chunk)], artifact_id="answer", append=index > 0, last_chunk=index == len(self.chunks) - 1
            )
            await asyncio.sleep(0.05)
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        await TaskUpdater(event_queue, str(context.task_id), str(context.context_id)).cancel()


class _AskThenChunkedAnswer(_ChunkedAnswer):
    """Asks `question` (`input-required`) on a new task; streams `chunks` once it is answered. The
    continuation enqueues no Task, as `TaskUpdater` users do: its stream starts with a status update."""

    def __init__(self, question: str, chunks: list[str]) -> None:
        super().__init__(chunks)
        self.question = question
        self.answers: list[str] = []

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        updater = TaskUpdater(event_queue, str(context.task_id), str(context.context_id))
        if context.current_task is None:
            submitted = Task(
                id=str(context.task_id),
                context_id=str(context.context_id),
                status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
            )
            await event_queue.enqueue_event(submitted)
            await updater.requires_input(updater.new_agent_message([Part(text=self.question)]))
            return
        self.answers.append(context.get_user_input())
        await updater.start_work()
        for index, chunk in enumerate(self.chunks):
            await updater.add_artifact(
                [Part(text=chunk)], artifact_id="answer", append=index > 0, last_chunk=index == len(self.chunks) - 1
            )
        await updater.complete()


class FakeStreamingA2APeer(Served):
    """An A2A 1.0 peer built on the `a2a-sdk` server whose card says `streaming`: it streams its
    answer as artifact chunks. Records the JSON-RPC methods called."""

    def __init__(self, chunks: list[str], *, question: str = "") -> None:
        self.methods: list[str] = []
        self.executor = _AskThenChunkedAnswer(question, chunks) if question else _ChunkedAnswer(chunks)
        handler = DefaultRequestHandler(
            agent_executor=self.executor,
            task_store=InMemoryTaskStore(),
            agent_card=a2a_peer_card("http://placeholder", streaming=True),
        )
        app = Starlette(
            routes=[
                Route("/.well-known/agent-card.json", self._card, methods=["GET"]),
                *create_jsonrpc_routes(handler, "/rpc"),
            ]
        )
        super().__init__(_MethodRecorder(app, self.methods), "fake-streaming-a2a")

    async def _card(self, request: Request) -> Response:
        return JSONResponse(agent_card_to_dict(a2a_peer_card(self.url, streaming=True)))


class _MethodRecorder:
    """ASGI middleware noting each JSON-RPC method before the app reads the body."""

    def __init__(self, app: Starlette, methods: list[str]) -> None:
        self.app = app
        self.methods = methods

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != "/rpc":
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        body = b"".join(chunks)
        self.methods.append(json.loads(body).get("method", ""))
        replayed = False

        async def replay() -> Message_:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)
