"""Who an HTTP request is from, decided before any view runs (`identity_decide` does the deciding).

Sets `request.operator` (an `Identity`, or None on a public path without one) and, for local and
proxy identities, `request.user` to the operator's Django user, so the admin and `login_required`
agree with the rest of Hermes. Refuses everything else that may not be served:

- a `Refusal` from `identity_decide` → 403 (on a public path only the plain "not signed in" passes);
- django mode without a signed-in user → the login form for a browser, 403 for a script;
- an operator deactivated in the admin → 403;
- no database to find the operator's user in → 503, as the HTTP API answers then.

Views read the operator through `access.identity.operator_identity(request)`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from asgiref.sync import iscoroutinefunction
from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.db import OperationalError
from django.http import HttpRequest, HttpResponseBase
from django.utils.decorators import sync_and_async_middleware

from access.identity import (
    FROM_SESSION,
    Identity,
    Refusal,
    identity_decide,
    identity_from_user,
    identity_is_public,
    proxy_headers_from_request,
)
from access.refusals import database_refusal_response, refusal_note, refusal_response
from access.users import operator_user_sync
from common.db import db_request_call

GetResponse = Callable[[HttpRequest], Any]


@sync_and_async_middleware
def operator_identity_middleware(get_response: GetResponse) -> Callable[[HttpRequest], Any]:
    if iscoroutinefunction(get_response):

        async def middleware_async(request: HttpRequest) -> HttpResponseBase:
            # The connection goes back to the pool as soon as the operator is known: otherwise this
            # request's thread would keep it until the response ends, e.g. while `/query` waits
            # minutes for a slow tool, and a few dozen of those starve the pool. On SQLite the
            # lookup runs on threads that keep their connection open (`db_request_call`).
            refused = await db_request_call(request_identify, request=request)
            if refused is not None:
                return refused
            response: Awaitable[HttpResponseBase] = get_response(request)
            return await response

        return middleware_async

    def middleware(request: HttpRequest) -> HttpResponseBase:
        refused = request_identify(request)
        return refused if refused is not None else get_response(request)

    return middleware


def request_identify(request: HttpRequest) -> HttpResponseBase | None:
    """Attach the request's operator; returns the response that refuses it (noting why on the request,
    `access.refusals.refusal_note`), or None to go on."""
    public = identity_is_public(request.path_info)
    decision = identity_decide(peer=request.META.get("REMOTE_ADDR"), headers=proxy_headers_from_request(request))
    request.operator = None  # type: ignore[attr-defined]
    if isinstance(decision, Refusal):
        if public and decision.code == "not_signed_in":
            return None
        return _refuse(request, 403, decision.code, decision.message)
    if decision is FROM_SESSION:
        if public:
            return None  # the probes answer without the database; the login form reads the session itself
        try:
            identity = identity_from_user(request.user)
        except OperationalError as exc:
            return database_refusal_response(exc)
        if identity is None:
            return _sign_in_required(request)
        request.operator = identity  # type: ignore[attr-defined]
        return None
    assert isinstance(decision, Identity)
    if not public:
        # Probes skip this: they must answer without the database (a health check reports it down).
        try:
            user = operator_user_sync(decision)
        except OperationalError as exc:
            return database_refusal_response(exc)
        if not user.is_active:
            return _refuse(request, 403, "operator_disabled", f"The operator {user.username!r} is deactivated.")
        request.user = user

        async def auser() -> Any:
            return user

        request.auser = auser
    request.operator = decision  # type: ignore[attr-defined]
    return None


def _refuse(request: HttpRequest, status: int, code: str, message: str) -> HttpResponseBase:
    refusal_note(request, code, message)
    return refusal_response(status, code, message)


def _sign_in_required(request: HttpRequest) -> HttpResponseBase:
    refusal_note(request, "not_signed_in", "Sign in first: this request carries no operator identity.")
    wants_page = request.method in ("GET", "HEAD") and "text/html" in request.headers.get("Accept", "")
    if wants_page and not request.headers.get("HX-Request"):
        return redirect_to_login(request.get_full_path(), settings.LOGIN_URL)
    return refusal_response(403, "not_signed_in", "Sign in first: this request carries no operator identity.")
