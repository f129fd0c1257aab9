"""The seam to the language model: an Anthropic Messages API client built from settings.

`ANTHROPIC_BASE_URL` lets an operator point Hermes at any compatible server (a local Ollama, a
gateway); with a base URL but no key Hermes runs keyless, which such servers accept.

The client neither times out reads nor retries: the turn engine bounds each call itself (silence
and the turn's time limit, see `agent.engine.model_call`) and retries only what is safe to retry. An
httpx read timeout restarts with every byte, so a stream that sends `ping` events forever would
never trip it; and the SDK's own retries would spend the turn's time without it knowing.

Requests go out over aiohttp (the SDK's `DefaultAioHttpClient`), not httpx's own transport: reading
many concurrent streams through httpx, httpcore and anyio costs noticeably more CPU per turn
(docs/performance.md). The SDK maps aiohttp's errors to httpx's, which `llm_failure` classifies.
"""

from __future__ import annotations

import asyncio
import email.utils
import random
import time
import weakref
from dataclasses import dataclass

import anthropic
import httpx2
from anthropic.lib.streaming import _messages as sdk_message_stream
from django.conf import settings

from common.keepalive import KEEPALIVE_SECONDS
from common.redaction import redact

NOT_CONFIGURED_MESSAGE = (
    "No language model is configured. Set ANTHROPIC_API_KEY to use Anthropic's API, "
    "or ANTHROPIC_BASE_URL to use a compatible local server (for example Ollama), then try again."
)

CONNECT_TIMEOUT = 10.0

# What a retry may help with: the API's own list (the statuses the SDK retries, and the error
# types of an `error` event inside a 200 stream that mean "not now" rather than "never").
RETRY_STATUSES = frozenset({408, 409, 429})
RETRY_STREAM_ERRORS = frozenset({"overloaded_error", "api_error", "rate_limit_error", "timeout_error"})
# A `retry-after` longer than this is not waited out inside a turn: the call fails instead.
RETRY_AFTER_MAX = 20.0
BACKOFF_INITIAL = 0.5
BACKOFF_MAX = 8.0


# The SDK's stream accumulator evaluates `ParsedMessage[ResponseFormatT]` at every response's start,
# and pydantic keeps parametrized classes only weakly, so each garbage collection made the next
# stream build it again. Held here, it is built once.
_SDK_PARSED_MESSAGE = sdk_message_stream.ParsedMessage[sdk_message_stream.ResponseFormatT]


class LLMNotConfigured(Exception):
    def __init__(self) -> None:
        super().__init__(NOT_CONFIGURED_MESSAGE)


@dataclass(frozen=True, kw_only=True)
class ModelConfig:
    """Which model Hermes asks, and where; read at each use so that tests may change it."""

    api_key: str
    # A compatible server instead of Anthropic's ("" for Anthropic's).
    base_url: str
    # What a session uses unless the operator picks another of `models` (which includes it).
    model: str
    models: tuple[str, ...]

    @classmethod
    def from_settings(cls) -> ModelConfig:
        return cls(
            api_key=settings.ANTHROPIC_API_KEY,
            base_url=settings.ANTHROPIC_BASE_URL,
            model=settings.HERMES_MODEL,
            models=tuple(settings.HERMES_MODELS),
        )


def llm_configured() -> bool:
    config = ModelConfig.from_settings()
    return bool(config.api_key or config.base_url)


# One client per event loop: its connection pool belongs to the loop that opened it.
_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, anthropic.AsyncAnthropic] = weakref.WeakKeyDictionary()


def llm_client() -> anthropic.AsyncAnthropic:
    """The Messages API client for the running event loop; raises `LLMNotConfigured`."""
    if not llm_configured():
        raise LLMNotConfigured
    loop = asyncio.get_running_loop()
    client = _clients.get(loop)
    if client is None:
        # Only connecting is bounded here; the engine bounds the rest (see the module's note).
        timeout = httpx2.Timeout(None, connect=CONNECT_TIMEOUT)
        limits = httpx2.Limits(
            max_connections=anthropic.DEFAULT_CONNECTION_LIMITS.max_connections,
            max_keepalive_connections=anthropic.DEFAULT_CONNECTION_LIMITS.max_keepalive_connections,
            keepalive_expiry=KEEPALIVE_SECONDS,
        )
        config = ModelConfig.from_settings()
        client = anthropic.AsyncAnthropic(
            # Always explicit: never fall back to a key or profile found elsewhere on the machine.
            api_key=config.api_key or "no-key",
            base_url=config.base_url or None,
            timeout=timeout,
            max_retries=0,
            http_client=anthropic.DefaultAioHttpClient(timeout=timeout, limits=limits),
        )
        _clients[loop] = client
    return client


async def llm_client_close() -> None:
    """Close the running loop's client and its connections; the next `llm_client()` opens a new one."""
    client = _clients.pop(asyncio.get_running_loop(), None)
    if client is not None:
        await client.close()


@dataclass(frozen=True)
class LLMFailure:
    """Why one model call failed: a sentence for the operator, and whether trying again may help."""

    message: str
    retryable: bool = False
    # Seconds the API asked us to wait (`retry-after`), when it said.
    retry_after: float | None = None


def llm_failure(exc: BaseException, *, model: str | None = None) -> LLMFailure:
    """Classify an exception of the SDK or its HTTP client (`model`: the one the call asked for)."""
    return LLMFailure(
        message=llm_error_describe(exc, model=model), retryable=_retryable(exc), retry_after=_retry_after(exc)
    )


def llm_retry_delay(failure: LLMFailure, *, attempt: int) -> float | None:
    """Seconds to wait before attempt `attempt + 1`, or None when the API asked for too long a wait.

    The API's `retry-after` is obeyed when it is short; otherwise exponential backoff with jitter,
    so that many turns hit by one overload do not come back at the same instant.
    """
    if failure.retry_after is not None:
        return failure.retry_after if failure.retry_after <= RETRY_AFTER_MAX else None
    return min(BACKOFF_INITIAL * 2 ** (attempt - 1), BACKOFF_MAX) * (1 - 0.25 * random.random())


def llm_error_describe(exc: BaseException, *, model: str | None = None) -> str:
    """One sentence for the operator about why the model call failed (never the request body).

    Redacted: a server's error message may quote the key it was sent.
    """
    return redact(_llm_error_text(exc, model=model or ModelConfig.from_settings().model))


def _llm_error_text(exc: BaseException, *, model: str) -> str:
    if isinstance(exc, anthropic.AuthenticationError):
        return "The model API rejected the credentials (401): check ANTHROPIC_API_KEY."
    if isinstance(exc, anthropic.NotFoundError):
        return f"The model API does not know the model {model!r} (404): check HERMES_MODEL and HERMES_MODELS."
    if isinstance(exc, anthropic.APIStatusError):
        message = _api_error_message(exc)
        kind = _api_error_type(exc)
        if kind == "overloaded_error" or exc.status_code == 529:
            return f"The model API is overloaded: {message}"
        if kind == "rate_limit_error" or exc.status_code == 429:
            return f"The model API's rate limit was reached: {message}"
        if exc.status_code == 200:
            # An `error` event inside the stream: the HTTP status says nothing about it.
            return f"The model API failed while answering ({kind or 'error'}): {message}"
        return f"The model API answered {exc.status_code}: {message}"
    if isinstance(exc, anthropic.APITimeoutError | httpx2.TimeoutException):
        return "The model API did not answer in time."
    if isinstance(exc, anthropic.APIConnectionError | httpx2.TransportError):
        return f"Could not talk to the model API: {exc.__class__.__name__}: {exc}"
    return f"The model call failed: {exc.__class__.__name__}: {exc}"


def _retryable(exc: BaseException) -> bool:
    if isinstance(exc, anthropic.APIStatusError):
        # The API (and our fake) says so explicitly when it knows; the SDK obeys the same header.
        should = exc.response.headers.get("x-should-retry")
        if should in ("true", "false"):
            return should == "true"
        if exc.status_code == 200:
            return _api_error_type(exc) in RETRY_STREAM_ERRORS
        return exc.status_code in RETRY_STATUSES or exc.status_code >= 500
    return isinstance(exc, anthropic.APIConnectionError | httpx2.TransportError)


def _retry_after(exc: BaseException) -> float | None:
    if not isinstance(exc, anthropic.APIStatusError):
        return None
    headers = exc.response.headers
    try:
        if milliseconds := headers.get("retry-after-ms"):
            return max(float(milliseconds) / 1000, 0.0)
        if seconds := headers.get("retry-after"):
            try:
                return max(float(seconds), 0.0)
            except ValueError:
                moment = email.utils.parsedate_to_datetime(seconds)
                return max(moment.timestamp() - time.time(), 0.0)
    except (TypeError, ValueError):
        return None
    return None


def _api_error_type(exc: anthropic.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and isinstance(error.get("type"), str):
            return str(error["type"])
    return ""


def _api_error_message(exc: anthropic.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
    return exc.message
