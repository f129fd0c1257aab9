"""A scripted Anthropic Messages API: a real HTTP server on loopback for tests.

The test process, a Daphne subprocess and `manage.py ask` subprocesses all reach it through
`ANTHROPIC_BASE_URL=fake.url` with `ANTHROPIC_API_KEY=fake.api_key` (see `fake.env()`).

    with FakeAnthropic() as fake:   # or the `fake_llm` fixture
        fake.enqueue(Reply.tool_use("mcp__oikos__health_summary", {}), Reply.text("All good."))
        ...  # run the code under test against fake.url
        assert not fake.rejections
        assert fake.requests[1].body["messages"][-1]["content"][0]["type"] == "tool_result"

Each `POST /v1/messages` is first checked like the real API checks it (`anthropic_validation`:
400 `invalid_request_error`, 401 for a wrong key, 404 for an unknown model). With a
`context_window` (tokens, `FakeAnthropic(context_window=...)` or set later), a prompt longer than
it is refused as the API refuses it: 400 `invalid_request_error`, "prompt is too long: N tokens >
M maximum". Tokens are the fake's estimate (about four characters of each block's JSON a token,
`anthropic_cache.prompt_tokens`); `POST /v1/messages/count_tokens` answers the same count, and
the usage of an answer adds up to it. An accepted request
is answered by the next queued reply, else by `fake.responder(body)`, else with a 500
`api_error` saying the script ran out. A refused request consumes no reply.

A reply no real model could give to that request is refused too, with a 500 `api_error` (and the
reply is used up): a tool call when the request offers no tools or says `tool_choice: none`, or
a call to a tool the request does not offer. So a responder for "a model that always calls tools"
checks `body.get("tools")` and `body.get("tool_choice")` and answers with text when it may not.

Thinking (`anthropic_thinking`): the request's `thinking` and `output_config.effort` are checked
per model family; every thinking block served is signed, and one sent back must verify and, for the
last tool-use cycle, come back first and unchanged, as the API requires. A reply that thinks is
refused (500) when the request does not enable thinking.

Everything the fake refuses on its own is listed in `fake.rejections` (scripted `http_error`s
are not), so `assert not fake.rejections` proves the API would have accepted every request and
the script was consistent with it.

What the anthropic 2.14 SDK (`AsyncAnthropic.messages.stream`) makes of each scripted failure,
as measured by `tests/fakes/test_anthropic_api.py`:
- `Reply.http_error(529, ...)` (any 408/409/429/5xx): retried by the SDK up to `max_retries`;
  the retry takes the next queued reply. A 4xx such as 400 raises the matching
  `anthropic.APIStatusError` subclass at once.
- `Reply.stream_error(...)`: `anthropic.APIStatusError` with `status_code == 200` while the
  stream is read; `error.body["error"]["type"]` is the scripted type. Never retried.
- `Reply.drop(...)`: `httpx2.RemoteProtocolError` (not wrapped by the SDK) while the stream is
  read. Never retried.
- `Reply.stall(...)`: `httpx2.ReadTimeout` (not wrapped) once the client's read timeout passes.
- `Reply.pings(...)`: no error and no event ever: the SDK skips `ping` events, and the bytes
  keep httpx's per-read timeout from firing. Only a deadline of the client's own ends it.
- `Reply.not_event_stream(...)`: no error from the SDK while iterating (it finds no SSE event);
  `get_final_message()` then fails with a bare `AssertionError`.
- `Reply.truncated()`: no error at all; `get_final_message()` returns the partial message with
  `stop_reason is None` and `usage.output_tokens == 1` (from `message_start`). A client must
  treat a missing stop_reason as a failed response.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.fakes.anthropic_cache import PromptCache, prompt_tokens
from tests.fakes.anthropic_script import ApiError, Reply
from tests.fakes.anthropic_stream import ScriptedStream, TruncatedBody
from tests.fakes.anthropic_thinking import ThinkingLedger, impossible_thinking, settings_problem
from tests.fakes.anthropic_validation import impossible_reply, prompt_too_long, request_problem
from tests.fakes.anthropic_wire import message_events, message_json, new_id
from tests.fakes.loopback import LoopbackServer

DEFAULT_API_KEY = "sk-ant-test-key"
DEFAULT_MODELS = ("claude-sonnet-5", "claude-opus-5", "claude-haiku-4-5")
MAX_REQUEST_BYTES = 32 * 1024 * 1024  # the API's limit for /v1/messages

Responder = Callable[[dict[str, Any]], Reply]


@dataclass(frozen=True)
class RecordedRequest:
    """One `POST /v1/messages` as the fake received it, and what it answered."""

    request_id: str
    """The `request-id` header of the answer (`req_…`)."""
    headers: dict[str, str]
    """Lower-cased header names."""
    body: Any
    """The parsed JSON body (None when it was not JSON)."""
    rejection: ApiError | None
    """Set when the fake refused the request on its own (never for a scripted http_error)."""
    reply: Reply | None
    """The scripted reply served, tool_use ids filled in; None when refused."""
    client_port: int | None = None
    """The client's port: requests with the same port came over the same connection."""

    @property
    def streamed(self) -> bool:
        return isinstance(self.body, dict) and self.body.get("stream") is True


class FakeAnthropic:
    """The scripted Messages API server. Use it as a context manager or call start()/stop().

    `models` are the model ids it knows (others get 404 `not_found_error`, like the API);
    `min_cacheable_tokens` is the shortest prefix a cache breakpoint writes (the API's is 1024+
    tokens; 0 caches any prefix so small test prompts show cache reads); `context_window` is the
    most input tokens a prompt may have (None: no limit).
    """

    def __init__(
        self,
        *,
        api_key: str = DEFAULT_API_KEY,
        models: Iterable[str] = DEFAULT_MODELS,
        min_cacheable_tokens: int = 0,
        context_window: int | None = None,
    ) -> None:
        self.api_key = api_key
        self.models = tuple(models)
        self.context_window = context_window
        """Prompts longer than this many tokens are refused as too long (None: any length)."""
        self.token_counts: list[int] = []
        """What each accepted `/v1/messages/count_tokens` request was answered, in order."""
        self.responder: Responder | None = None
        """Answers a request when the queue is empty: `responder(request_body) -> Reply`.

        Called on the server's thread for each such request; it must return quickly."""
        self._script: deque[Reply] = deque()
        self._log: list[RecordedRequest] = []
        self._changed = threading.Condition()
        self._cache = PromptCache(min_cacheable_tokens=min_cacheable_tokens)
        self._thinking = ThinkingLedger()
        self._server = LoopbackServer(self._app(), name="fake-anthropic")

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> FakeAnthropic:
        """Bind 127.0.0.1 on an ephemeral port and serve from a background thread."""
        self._server.start()
        return self

    def stop(self) -> None:
        """End open streams (stalled ones included), shut the server down and join its thread."""
        self._server.stop()

    def __enter__(self) -> FakeAnthropic:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """The base URL for `ANTHROPIC_BASE_URL` / `base_url=` (no `/v1`)."""
        if self._server.url is None:
            raise RuntimeError("FakeAnthropic is not running; call start() first")
        return self._server.url

    def env(self) -> dict[str, str]:
        """The environment a subprocess needs to use this fake."""
        return {"ANTHROPIC_BASE_URL": self.url, "ANTHROPIC_API_KEY": self.api_key}

    # -- scripting and inspection -------------------------------------------------------------

    def enqueue(self, *replies: Reply) -> None:
        """Queue replies, consumed one per accepted `/v1/messages` request, in order."""
        for reply in replies:
            if not isinstance(reply, Reply):
                raise TypeError(f"enqueue takes Reply objects, not {reply!r}")
        with self._changed:
            self._script.extend(replies)

    @property
    def pending(self) -> int:
        """Queued replies not served yet."""
        with self._changed:
            return len(self._script)

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every `/v1/messages` request so far, in arrival order, rejected ones included."""
        with self._changed:
            return list(self._log)

    @property
    def rejections(self) -> list[RecordedRequest]:
        """The requests the fake refused on its own (validation, auth, model, empty script)."""
        return [request for request in self.requests if request.rejection is not None]

    def wait_for_requests(self, count: int, *, timeout: float = 10.0) -> list[RecordedRequest]:
        """Block until at least `count` requests arrived (e.g. from a subprocess); return them."""
        with self._changed:
            if not self._changed.wait_for(lambda: len(self._log) >= count, timeout=timeout):
                raise TimeoutError(f"FakeAnthropic got {len(self._log)} of {count} requests in {timeout} s")
            return list(self._log)

    # -- the HTTP application (runs on the server thread) -----------------------------------

    def _app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/messages", self._messages, methods=["POST"]),
                Route("/v1/messages/count_tokens", self._count_tokens, methods=["POST"]),
                Route("/v1/models", self._list_models, methods=["GET"]),
                Route("/v1/models/{model_id:path}", self._get_model, methods=["GET"]),
            ],
            exception_handlers={HTTPException: _http_exception},
        )

    async def _messages(self, request: Request) -> Response:
        request_id = new_id("req_")
        headers = dict(request.headers)
        raw = await request.body()
        body: Any = None
        with contextlib.suppress(ValueError):
            body = json.loads(raw)
        if not self._authorized(headers):
            problem: ApiError | None = _AUTHENTICATION_FAILED
        elif len(raw) > MAX_REQUEST_BYTES:
            problem = ApiError(413, "request_too_large", "Request exceeds the maximum allowed number of bytes.")
        elif body is None:
            problem = ApiError(400, "invalid_request_error", "There was an error parsing the body of your request")
        else:
            problem = (
                request_problem(body, known_models=self.models)
                or settings_problem(body)
                or self._thinking.history_problem(body)
            )
            if problem is None:
                problem = prompt_too_long(prompt_tokens(body), window=self.context_window)
        reply = None
        if problem is None:
            reply, problem = self._next_reply(body)
        port = request.client.port if request.client else None
        self._record(
            RecordedRequest(
                request_id=request_id, headers=headers, body=body, rejection=problem, reply=reply, client_port=port
            )
        )
        if problem is not None:
            # The SDK obeys this header: a refusal is final, and a retry would only repeat it.
            return _error_response(problem, request_id=request_id, headers={"x-should-retry": "false"})
        assert reply is not None
        if reply.error is not None:
            extra = {"retry-after": str(reply.retry_after)} if reply.retry_after is not None else {}
            return _error_response(reply.error, request_id=request_id, headers=extra)
        usage = self._cache.account(body)
        message_id, model = new_id("msg_"), str(body["model"])
        stopping = self._server.stopping
        if reply.fault is not None and reply.fault.kind == "not_sse":
            fault = reply.fault
            page = fault.body
            if page is None:
                page = json.dumps(message_json(reply, message_id=message_id, model=model, usage=usage))
            return Response(page, media_type=fault.content_type, headers={"request-id": request_id})
        if body.get("stream") is True:
            events = message_events(reply, message_id=message_id, model=model, usage=usage)
            return ScriptedStream(
                events, fault=reply.fault, delay=reply.delay, request_id=request_id, stopping=stopping
            )
        payload = json.dumps(message_json(reply, message_id=message_id, model=model, usage=usage)).encode()
        if reply.fault is not None:
            # Without a stream only a dropped or stalled connection makes sense.
            return TruncatedBody(payload, fault=reply.fault, request_id=request_id, stopping=stopping)
        return Response(payload, media_type="application/json", headers={"request-id": request_id})

    async def _count_tokens(self, request: Request) -> Response:
        """The input tokens of a request, without answering it (checked like a message request)."""
        request_id = new_id("req_")
        if not self._authorized(dict(request.headers)):
            return _error_response(_AUTHENTICATION_FAILED, request_id=request_id)
        body: Any = None
        with contextlib.suppress(ValueError):
            body = json.loads(await request.body())
        problem: ApiError | None
        if not isinstance(body, dict):
            problem = ApiError(400, "invalid_request_error", "There was an error parsing the body of your request")
        else:
            problem = request_problem({**body, "max_tokens": 1}, known_models=self.models)
        if problem is not None:
            return _error_response(problem, request_id=request_id)
        tokens = prompt_tokens(body)
        with self._changed:
            self.token_counts.append(tokens)
        return JSONResponse({"input_tokens": tokens}, headers={"request-id": request_id})

    def _next_reply(self, body: dict[str, Any]) -> tuple[Reply | None, ApiError | None]:
        with self._changed:
            reply = self._script.popleft() if self._script else None
        if reply is None and self.responder is not None:
            try:
                reply = self.responder(body)
            except Exception as error:
                return None, ApiError(500, "api_error", f"FakeAnthropic responder raised {error!r}")
            if not isinstance(reply, Reply):
                return None, ApiError(500, "api_error", f"FakeAnthropic responder returned {reply!r}")
        if reply is None:
            return None, ApiError(
                500, "api_error", "FakeAnthropic script ran out: no reply queued and no responder set"
            )
        if reply.fault is not None and body.get("stream") is not True and reply.fault.kind not in ("drop", "stall"):
            return None, ApiError(
                500, "api_error", f"FakeAnthropic: a {reply.fault.kind} reply needs a streaming request"
            )
        if (impossible := impossible_reply(reply, body) or impossible_thinking(reply, body)) is not None:
            return None, ApiError(500, "api_error", f"FakeAnthropic: {impossible}")
        served = reply.with_tool_ids(lambda: new_id("toolu_")).with_signatures(
            self._thinking.sign, self._thinking.opaque
        )
        self._thinking.served(served)
        return served, None

    def _record(self, recorded: RecordedRequest) -> None:
        with self._changed:
            self._log.append(recorded)
            self._changed.notify_all()

    def _authorized(self, headers: dict[str, str]) -> bool:
        return headers.get("x-api-key") == self.api_key or headers.get("authorization") == f"Bearer {self.api_key}"

    async def _list_models(self, request: Request) -> Response:
        if not self._authorized(dict(request.headers)):
            return _error_response(_AUTHENTICATION_FAILED, request_id=new_id("req_"))
        data = [_model_info(model) for model in self.models]
        return JSONResponse(
            {
                "data": data,
                "has_more": False,
                "first_id": data[0]["id"] if data else None,
                "last_id": data[-1]["id"] if data else None,
            }
        )

    async def _get_model(self, request: Request) -> Response:
        request_id = new_id("req_")
        if not self._authorized(dict(request.headers)):
            return _error_response(_AUTHENTICATION_FAILED, request_id=request_id)
        model_id = request.path_params["model_id"]
        if model_id not in self.models:
            return _error_response(ApiError(404, "not_found_error", f"model: {model_id}"), request_id=request_id)
        return JSONResponse(_model_info(model_id), headers={"request-id": request_id})


_AUTHENTICATION_FAILED = ApiError(401, "authentication_error", "invalid x-api-key")


def _error_response(error: ApiError, *, request_id: str, headers: dict[str, str] | None = None) -> Response:
    return JSONResponse(
        error.to_json(request_id=request_id),
        status_code=error.status,
        headers={"request-id": request_id, **(headers or {})},
    )


async def _http_exception(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    kind = "not_found_error" if exc.status_code == 404 else "invalid_request_error"
    message = "Not found" if exc.status_code == 404 else str(exc.detail)
    return _error_response(ApiError(exc.status_code, kind, message), request_id=new_id("req_"))


def _model_info(model_id: str) -> dict[str, Any]:
    words = model_id.split("-")
    name = " ".join(word.capitalize() for word in words if not word.isdigit())
    version = ".".join(word for word in words if word.isdigit())
    return {
        "type": "model",
        "id": model_id,
        "display_name": f"{name} {version}".strip(),
        "created_at": "2026-01-01T00:00:00Z",
        "lifecycle": "active",
        "max_input_tokens": 200_000,
        "max_tokens": 64_000,
    }
