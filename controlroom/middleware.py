"""Every approval decision attempt is recorded, the refused ones too.

A decision that reaches Oikos is recorded by `approval_decide`, whatever Oikos answers. One that
Hermes refuses first never gets that far: the identity middleware refuses a request without an
operator, Django's CSRF check one without a valid token, the view a malformed decision. This
middleware sits outside all of them (see MIDDLEWARE), so it sees the refusal whoever made it, and
records the attempt as `rejected` with the reason the refuser noted on the request
(`access.refusals.refusal_note`) and the address it came from.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from asgiref.sync import iscoroutinefunction
from channels.db import database_sync_to_async
from django.core.exceptions import SuspiciousOperation
from django.db import DatabaseError
from django.http import HttpRequest, HttpResponseBase
from django.http.multipartparser import MultiPartParserError
from django.urls import Resolver404, resolve
from django.utils.decorators import sync_and_async_middleware

from access.identity import operator_identity
from access.refusals import refusal_noted
from oikos import services
from oikos.approvals import decisions_changed_publish

logger = logging.getLogger(__name__)

DECIDE_VIEW = "controlroom:approval_decide"


@sync_and_async_middleware
def decision_attempts_middleware(get_response: Callable[[HttpRequest], Any]) -> Callable[[HttpRequest], Any]:
    if iscoroutinefunction(get_response):

        async def middleware_async(request: HttpRequest) -> HttpResponseBase:
            response: HttpResponseBase = await get_response(request)
            if _refused_decision(request, response):
                await database_sync_to_async(decision_refusal_record)(request, response)
                await decisions_changed_publish()
            return response

        return middleware_async

    def middleware(request: HttpRequest) -> HttpResponseBase:
        response: HttpResponseBase = get_response(request)
        if _refused_decision(request, response):
            decision_refusal_record(request, response)
        return response

    return middleware


def _refused_decision(request: HttpRequest, response: HttpResponseBase) -> bool:
    if request.method != "POST" or response.status_code < 400:
        return False
    try:
        return resolve(request.path_info).view_name == DECIDE_VIEW
    except Resolver404:
        return False


def decision_refusal_record(request: HttpRequest, response: HttpResponseBase) -> None:
    """Record the refused attempt: what it asked for, who (if anyone) asked, and why it was refused."""
    noted = refusal_noted(request)
    refusal = f"{noted.code}: {noted.message}" if noted else f"refused with HTTP {response.status_code}"
    try:
        fields = request.POST
    except (SuspiciousOperation, MultiPartParserError, UnicodeDecodeError, ValueError):
        fields = None  # a body that is not a form: the attempt is still recorded, without its fields
    identity = operator_identity(request)
    try:
        services.approval_decision_refusal_record(
            approval_id=fields.get("approval_id", "") if fields else "",
            execution_id=fields.get("execution_id", "") if fields else "",
            decision=fields.get("decision", "") if fields else "",
            operator=identity.username if identity is not None else "",
            reason=fields.get("reason", "") if fields else "",
            refusal=refusal,
            peer=request.META.get("REMOTE_ADDR", ""),
        )
    except DatabaseError as exc:
        # The refusal stands either way; without a database it cannot be recorded.
        logger.warning("refused approval decision attempt not recorded: %s", exc)
