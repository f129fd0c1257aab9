"""One error shape for every endpoint: `{"error": {"code": "...", "message": "..."}}`, status 4xx/5xx.

`code` is stable for scripts to branch on; `message` is a sentence for the person reading it.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from django.db import OperationalError
from django.http import HttpRequest, HttpResponseBase, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from access.refusals import database_refusal_response

logger = logging.getLogger(__name__)

AsyncView = Callable[..., Coroutine[Any, Any, HttpResponseBase]]


class ApiError(Exception):
    """Raised by a view (or what it calls) to answer with a JSON error; `extra` goes beside `error`."""

    def __init__(self, status: int, code: str, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.extra = extra

    def response(self) -> JsonResponse:
        return error_response(self.status, self.code, self.message, **self.extra)


def error_response(status: int, code: str, message: str, **extra: Any) -> JsonResponse:
    return JsonResponse({"error": {"code": code, "message": message}, **extra}, status=status)


def api_view(*methods: str) -> Callable[[AsyncView], AsyncView]:
    """An async JSON endpoint: other methods get a JSON 405, `ApiError`s become their response, and
    an unreachable or saturated database a JSON 503 (scripts retry on 503; an HTML 500 page tells them
    nothing).

    CSRF does not apply: these endpoints serve scripts, never a browser form, and they accept only
    `application/json` bodies, which a cross-site page cannot send without a CORS preflight.
    """
    allowed = frozenset(methods)

    def decorate(view: AsyncView) -> AsyncView:
        @functools.wraps(view)
        async def endpoint(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
            if request.method not in allowed:
                names = ", ".join(sorted(allowed))
                response = error_response(
                    405, "method_not_allowed", f"{request.method} is not allowed here; use {names}."
                )
                response["Allow"] = names
                return response
            try:
                return await view(request, *args, **kwargs)
            except ApiError as error:
                return error.response()
            except OperationalError as exc:
                logger.warning("database unavailable during %s %s: %s", request.method, request.path, exc)
                return database_refusal_response(exc)

        return csrf_exempt(endpoint)

    return decorate
