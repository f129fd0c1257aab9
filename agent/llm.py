"""The seam to the language model: an Anthropic Messages API client built from settings.

`ANTHROPIC_BASE_URL` lets an operator point Hermes at any compatible server (a local Ollama, a
gateway); with a base URL but no key Hermes runs keyless, which such servers accept.
"""

from __future__ import annotations

import asyncio
import weakref

import anthropic
import httpx2
from django.conf import settings

from agent.redaction import redact

NOT_CONFIGURED_MESSAGE = (
    "No language model is configured. Set ANTHROPIC_API_KEY to use Anthropic's API, "
    "or ANTHROPIC_BASE_URL to use a compatible local server (for example Ollama), then try again."
)


class LLMNotConfigured(Exception):
    def __init__(self) -> None:
        super().__init__(NOT_CONFIGURED_MESSAGE)


def llm_configured() -> bool:
    return bool(settings.ANTHROPIC_API_KEY or settings.ANTHROPIC_BASE_URL)


# One client per event loop: its connection pool belongs to the loop that opened it.
_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, anthropic.AsyncAnthropic] = weakref.WeakKeyDictionary()


def llm_client() -> anthropic.AsyncAnthropic:
    """The Messages API client for the running event loop; raises `LLMNotConfigured`."""
    if not llm_configured():
        raise LLMNotConfigured
    loop = asyncio.get_running_loop()
    client = _clients.get(loop)
    if client is None:
        client = anthropic.AsyncAnthropic(
            # Always explicit: never fall back to a key or profile found elsewhere on the machine.
            api_key=settings.ANTHROPIC_API_KEY or "no-key",
            base_url=settings.ANTHROPIC_BASE_URL or None,
            timeout=httpx2.Timeout(settings.HERMES_LLM_TIMEOUT, connect=10.0),
            max_retries=2,
        )
        _clients[loop] = client
    return client


def llm_error_describe(exc: BaseException) -> str:
    """One sentence for the operator about why the model call failed (never the request body).

    Redacted: a server's error message may quote the key it was sent.
    """
    return redact(_llm_error_text(exc))


def _llm_error_text(exc: BaseException) -> str:
    if isinstance(exc, anthropic.AuthenticationError):
        return "The model API rejected the credentials (401): check ANTHROPIC_API_KEY."
    if isinstance(exc, anthropic.NotFoundError):
        return f"The model API does not know the model {settings.HERMES_MODEL!r} (404): check HERMES_MODEL."
    if isinstance(exc, anthropic.APIStatusError):
        message = _api_error_message(exc)
        return f"The model API answered {exc.status_code}: {message}"
    if isinstance(exc, anthropic.APITimeoutError | httpx2.TimeoutException):
        return "The model API did not answer in time."
    if isinstance(exc, anthropic.APIConnectionError | httpx2.TransportError):
        return f"Could not talk to the model API: {exc.__class__.__name__}: {exc}"
    return f"The model call failed: {exc.__class__.__name__}: {exc}"


def _api_error_message(exc: anthropic.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
    return exc.message
