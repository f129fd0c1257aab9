"""Django's own middleware, run on the event loop where its hooks cannot block.

Under ASGI, Django runs each hook of a `MiddlewareMixin` middleware (`process_request`,
`process_view`, `process_response`) through `sync_to_async`, in the request's own thread: a dozen
thread hops for every request through the stack in settings, most of them for hooks that only
read headers and set a few, seven of them these four middlewares' (docs/performance.md). These
subclasses call the hooks directly when they cannot touch the database or a file,
and still hand them to a thread when they may:

- sessions: saving a modified session writes it;
- messages: storing messages that were added or read writes the session (or a cookie);
- everything else here reads the request and sets attributes and headers only.

Security, CSRF and clickjacking protection stay Django's own classes: `check --deploy` recognises
them by name only, and would skip its HSTS, SSL-redirect and cookie checks for a subclass.

A synchronous stack (the test client, `manage.py` commands) runs them exactly as Django does.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth.middleware import AuthenticationMiddleware
from django.contrib.messages.middleware import MessageMiddleware
from django.contrib.sessions.middleware import SessionMiddleware
from django.http import HttpRequest, HttpResponseBase
from django.middleware.common import CommonMiddleware


class InlineHooks:
    """Mixed in before a `MiddlewareMixin` subclass: its hooks run on the event loop under ASGI."""

    async_mode: bool
    get_response: Any

    async def __acall__(self, request: HttpRequest) -> HttpResponseBase:
        response = None
        if hasattr(self, "process_request"):
            response = self.process_request(request)
        response = response or await self.get_response(request)
        if hasattr(self, "process_response"):
            if self.response_may_block(request):
                response = await sync_to_async(self.process_response, thread_sensitive=True)(request, response)
            else:
                response = self.process_response(request, response)
        return response

    def response_may_block(self, request: HttpRequest) -> bool:
        """Whether `process_response` may read or write storage for this request."""
        return False


class InlineSessionMiddleware(InlineHooks, SessionMiddleware):
    # `process_request` only makes a lazy session; the response saves it when it was changed.
    def response_may_block(self, request: HttpRequest) -> bool:
        session = getattr(request, "session", None)
        return session is not None and bool(session.modified or settings.SESSION_SAVE_EVERY_REQUEST)


class InlineCommonMiddleware(InlineHooks, CommonMiddleware):
    pass


class InlineAuthenticationMiddleware(InlineHooks, AuthenticationMiddleware):
    # Sets a lazy `request.user`: the user is read when something asks for it.
    pass


class InlineMessageMiddleware(InlineHooks, MessageMiddleware):
    def response_may_block(self, request: HttpRequest) -> bool:
        storage = getattr(request, "_messages", None)
        return storage is not None and bool(storage.used or storage.added_new)
