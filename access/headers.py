"""Content-Security-Policy on every response (Django 5.2 has no CSP support of its own).

One policy string, `settings.CONTENT_SECURITY_POLICY`: our own scripts, styles and images only, no
inline script, no eval, no plugins, no framing. A view that needs a different policy sets the header
itself and is left alone. The other browser headers come from Django's SecurityMiddleware and
XFrameOptionsMiddleware (see the access control settings).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from asgiref.sync import iscoroutinefunction
from django.conf import settings
from django.http import HttpRequest, HttpResponseBase
from django.utils.decorators import sync_and_async_middleware

HEADER = "Content-Security-Policy"


@sync_and_async_middleware
def content_security_policy_middleware(get_response: Callable[[HttpRequest], Any]) -> Callable[[HttpRequest], Any]:
    if iscoroutinefunction(get_response):

        async def middleware_async(request: HttpRequest) -> HttpResponseBase:
            return _policy_set(await get_response(request))

        return middleware_async

    def middleware(request: HttpRequest) -> HttpResponseBase:
        return _policy_set(get_response(request))

    return middleware


def _policy_set(response: HttpResponseBase) -> HttpResponseBase:
    if HEADER not in response and settings.CONTENT_SECURITY_POLICY:
        response[HEADER] = settings.CONTENT_SECURITY_POLICY
    return response
