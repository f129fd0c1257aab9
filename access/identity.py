"""Who is asking: one decision from (peer address, headers), shared by HTTP and websockets.

`identity_decide` is the only place that reads the sign-in proxy's headers. The Django middleware
(`access.middleware`) and the websocket middleware (`access.websocket`) both call it and differ only
in how they answer: a 403 response, or a websocket closed before it is accepted.

- `local`: every connection acts as `HERMES_LOCAL_OPERATOR`; proxy headers are ignored.
- `proxy`: the operator is `X-Authentik-Username` (with `-Email` and `-Groups`), believed only when
  the connecting peer is in `HERMES_TRUSTED_PROXY_CIDRS`. Those headers from any other peer are a
  forgery attempt and refused; a connection without them carries no identity.
- `django`: the identity is the Django login of the connection's session (`FROM_SESSION`), which
  the adapters read from `request.user` / `scope["user"]`.

Header values arrive decoded as ISO-8859-1 (HTTP's and ASGI's convention); Authentik sends UTF-8, so
a name like "zoë" is re-decoded before it is checked.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from django.http import HttpRequest

from access.config import AccessConfig
from access.networks import address_within, trusted_proxy_networks

USERNAME_HEADER = "x-authentik-username"
EMAIL_HEADER = "x-authentik-email"
GROUPS_HEADER = "x-authentik-groups"
PROXY_HEADERS: Final = (USERNAME_HEADER, EMAIL_HEADER, GROUPS_HEADER)

# Django's own user name rule (UnicodeUsernameValidator) and length; a comma also means the header
# was sent twice, which no honest proxy does.
_USERNAME = re.compile(r"[\w.@+-]{1,150}")
_EMAIL = re.compile(r"[^@\s]{1,64}@[^@\s]{1,189}")

# Paths (relative to HERMES_URL_PREFIX) that answer without an identity: the probes, and in
# `django` mode the login form.
PROBE_PATHS: Final = frozenset({"/healthz", "/metrics"})
LOGIN_PATH: Final = "/accounts/login/"


@dataclass(frozen=True)
class Identity:
    """An operator, and how we know who they are."""

    username: str
    via: Literal["local", "proxy", "django"]
    email: str = ""
    groups: tuple[str, ...] = ()

    @property
    def actor(self) -> str:
        """How sessions, turns and ledger rows this operator starts record who did it."""
        return f"operator:{self.username}"

    @property
    def is_staff(self) -> bool:
        """May use the admin: the local operator, and proxy users in HERMES_STAFF_GROUPS."""
        if self.via == "local":
            return True
        if self.via == "proxy":
            return bool(set(self.groups) & set(AccessConfig.from_settings().staff_groups))
        return False


@dataclass(frozen=True)
class Refusal:
    """The connection may not be served. `code` is stable for scripts; `message` is for people."""

    code: str
    message: str


class _FromSession:
    def __repr__(self) -> str:
        return "FROM_SESSION"


FROM_SESSION: Final = _FromSession()
Decision = Identity | Refusal | _FromSession


def identity_decide(*, peer: str | None, headers: Mapping[str, str]) -> Decision:
    """Decide who a connection is from its peer address and its headers (lower-case names).

    Returns an `Identity`, a `Refusal`, or `FROM_SESSION` (django mode: ask the session). A `None`
    identity never comes back: "anonymous" is `FROM_SESSION` with nobody signed in, or a `Refusal`.
    """
    config = AccessConfig.from_settings()
    mode = config.auth
    if mode == "local":
        return Identity(username=config.local_operator, via="local")
    if mode == "django":
        return FROM_SESSION
    presented = [name for name in PROXY_HEADERS if name in headers]
    if not address_within(peer, trusted_proxy_networks()):
        if presented:
            return Refusal(
                "untrusted_identity_headers",
                f"{_title(presented[0])} is accepted only from the sign-in proxy, and {peer or 'this peer'} is not it.",
            )
        return Refusal("not_signed_in", "Sign in through the proxy: this connection carries no operator identity.")
    username = _header_text(headers.get(USERNAME_HEADER, "")).strip()
    if not username:
        return Refusal("not_signed_in", "The sign-in proxy sent no X-Authentik-Username: sign in through it.")
    if not _USERNAME.fullmatch(username):
        return Refusal(
            "invalid_identity",
            "The sign-in proxy sent a user name Hermes cannot use (letters, digits and . @ + - _, at most 150).",
        )
    email = _header_text(headers.get(EMAIL_HEADER, "")).strip()
    groups = _header_text(headers.get(GROUPS_HEADER, ""))
    return Identity(
        username=username,
        via="proxy",
        email=email if _EMAIL.fullmatch(email) else "",
        groups=tuple(group.strip() for group in groups.split("|") if group.strip()),
    )


def identity_is_public(path: str) -> bool:
    """Whether `path` (without the URL prefix) may be served to a connection without an identity."""
    return path in PROBE_PATHS or (path == LOGIN_PATH and AccessConfig.from_settings().auth == "django")


def proxy_headers_from_pairs(pairs: Iterable[tuple[bytes, bytes]]) -> dict[str, str]:
    """The proxy headers of an ASGI scope; a header sent twice is joined with a comma, as Django does."""
    found: dict[str, str] = {}
    for raw_name, raw_value in pairs:
        name = raw_name.decode("latin-1").lower()
        if name in PROXY_HEADERS:
            value = raw_value.decode("latin-1")
            found[name] = f"{found[name]},{value}" if name in found else value
    return found


def proxy_headers_from_request(request: HttpRequest) -> dict[str, str]:
    return {name: request.headers[name] for name in PROXY_HEADERS if name in request.headers}


def identity_from_user(user: Any) -> Identity | None:
    """django mode: the signed-in user of a session as an operator; None when nobody is signed in."""
    if user is None or not user.is_authenticated or not user.is_active:
        return None
    return Identity(username=user.get_username(), via="django", email=user.email or "")


def operator_identity(request_or_scope: HttpRequest | Mapping[str, Any]) -> Identity | None:
    """The operator the access middleware found for a request or websocket scope; None if nobody."""
    if isinstance(request_or_scope, HttpRequest):
        identity = getattr(request_or_scope, "operator", None)
    else:
        identity = request_or_scope.get("operator")
    return identity if isinstance(identity, Identity) else None


def _header_text(value: str) -> str:
    try:
        return value.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return value


def _title(header: str) -> str:
    return "-".join(part.capitalize() for part in header.split("-"))
