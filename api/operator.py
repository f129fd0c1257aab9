"""Who an API request acts as: the operator the access middleware found (see `access.identity`)."""

from __future__ import annotations

from django.http import HttpRequest

from access.identity import operator_identity
from api.errors import ApiError


def request_actor(request: HttpRequest) -> str:
    """The actor recorded for what this request starts, e.g. `operator:alice`.

    The access middleware refuses requests without an operator before any view runs; raising here
    too means no view of the API can ever record work for nobody.
    """
    identity = operator_identity(request)
    if identity is None:
        raise ApiError(403, "not_signed_in", "Sign in first: this request carries no operator identity.")
    return identity.actor
