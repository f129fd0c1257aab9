"""One attempt at a model call, bounded in time: the request and its stream, nothing more.

Two bounds, both asyncio deadlines around the whole attempt rather than HTTP read timeouts:
- silence: `silence` seconds without a stream event fail the attempt. The API's `ping` events
  keep a connection open but carry nothing (the SDK skips them), so they are silence too; an
  HTTP read timeout, which restarts with every byte, let a pinging stream run for minutes.
- the turn's time limit (`time_limit`, a `time.monotonic()` moment): reached, the attempt ends at
  once, wherever it is (waiting for headers, mid-answer, between pings).

Whether a failed attempt is tried again is the caller's decision (`ModelCaller.call`): only
it knows whether anything was shown yet.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import anthropic
import httpx2

from agent.llm import LLMFailure, llm_failure


class AttemptFailed(Exception):
    """The attempt failed; `failure` says why and whether another attempt may help."""

    def __init__(self, failure: LLMFailure) -> None:
        super().__init__(failure.message)
        self.failure = failure


class TimeLimitReached(Exception):
    """The turn's time limit ended the attempt."""


async def model_stream(
    client: anthropic.AsyncAnthropic,
    params: dict[str, Any],
    *,
    time_limit: float,
    silence: float,
    opened: Callable[[Any], None],
    on_event: Callable[[Any], None],
) -> Any:
    """Stream one response; returns the final message (with a stop reason).

    `opened(stream)` is called once the response has begun, so the caller can read what was
    said so far if the attempt is cancelled or fails; `on_event(event)` sees each SDK event.
    Raises `AttemptFailed` or `TimeLimitReached`.
    """
    loop = asyncio.get_running_loop()
    overall = asyncio.timeout_at(loop.time() + (time_limit - time.monotonic()))
    quiet = asyncio.timeout(silence)
    began = False
    try:
        async with overall, quiet, client.messages.stream(**params) as stream:
            opened(stream)
            _event_stream_check(stream.response)
            async for event in stream:
                quiet.reschedule(loop.time() + silence)
                began = began or event.type == "message_start"
                on_event(event)
            if not began:
                raise AttemptFailed(
                    LLMFailure("The model API's stream ended before the message began.", retryable=True)
                )
            message = await stream.get_final_message()
    except TimeoutError:
        if overall.expired():
            raise TimeLimitReached from None
        if not quiet.expired():
            raise
        raise AttemptFailed(LLMFailure(f"The model API sent nothing for {silence:g} s (HERMES_LLM_TIMEOUT).")) from None
    except (anthropic.APIError, httpx2.HTTPError, ValueError) as exc:
        raise AttemptFailed(llm_failure(exc, model=str(params.get("model", "")) or None)) from exc
    if message.stop_reason is None:
        raise AttemptFailed(
            LLMFailure("The model's response stream ended before the message was complete.", retryable=True)
        )
    return message


def _event_stream_check(response: httpx2.Response) -> None:
    """A 200 that is not an event stream holds no answer: the SDK would find no event in it and
    fail later with a bare `AssertionError`."""
    content_type = response.headers.get("content-type", "")
    if not content_type.startswith("text/event-stream"):
        shown = content_type.split(";")[0] or "no content type"
        raise AttemptFailed(
            LLMFailure(
                f"The model API answered {response.status_code} with {shown} instead of an event stream: "
                "ANTHROPIC_BASE_URL may not point at a Messages API, or a proxy answered in its place."
            )
        )
