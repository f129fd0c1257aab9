"""The Servers page: the configured MCP servers, and "Connect" for those an operator authorizes
once with OAuth (authorization code with PKCE, `agent.tools.oauth.connect`). No token is shown."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from django.http import Http404, HttpRequest, HttpResponse, HttpResponseForbidden, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from agent.models import McpAuthorization, McpCredential
from agent.tools.config import MCPConfigError, ServerConfig, mcp_servers_from_settings
from agent.tools.oauth.connect import ConnectError, connect_finish, connect_start
from controlroom.identity import operator_name
from controlroom.views.pages import around_page

# How long the callback waits for the code to be exchanged before showing the page anyway.
_EXCHANGE_WAIT_SECONDS = 30.0


@dataclass(frozen=True)
class ServerRow:
    config: ServerConfig
    credential: McpCredential | None
    last: McpAuthorization | None

    @property
    def auth(self) -> str:
        oauth = self.config.oauth
        if oauth is None:
            return "headers" if self.config.headers else "none"
        return "OAuth, service account" if oauth.grant == "client_credentials" else "OAuth"

    @property
    def connected(self) -> bool:
        return self.credential is not None and bool(self.credential.tokens_sealed)


def _servers() -> tuple[list[ServerConfig], str]:
    try:
        return mcp_servers_from_settings(), ""
    except MCPConfigError as exc:
        return [], str(exc)


def _rows(configs: list[ServerConfig]) -> list[ServerRow]:
    names = [config.name for config in configs]
    credentials = {
        row.server: row
        for row in McpCredential.objects.filter(server__in=names)
        if row.server_url == next(config.url for config in configs if config.name == row.server)
    }
    last: dict[str, McpAuthorization] = {}
    for authorization in McpAuthorization.objects.filter(server__in=names).order_by("-created_at")[:200]:
        last.setdefault(authorization.server, authorization)
    return [ServerRow(config, credentials.get(config.name), last.get(config.name)) for config in configs]


def _page(request: HttpRequest, *, error: str = "", status: int = 200) -> HttpResponse:
    configs, config_error = _servers()
    shown: McpAuthorization | None = None
    try:
        shown = McpAuthorization.objects.filter(pk=uuid.UUID(request.GET.get("authorization", ""))).first()
    except ValueError:
        shown = None
    context = {
        **around_page(request),
        "rows": _rows(configs),
        "config_error": config_error,
        "error": error,
        "shown": shown,
    }
    return render(request, "controlroom/servers.html", context, status=status)


@require_GET
def servers_page(request: HttpRequest) -> HttpResponse:
    return _page(request)


@require_POST
def server_connect(request: HttpRequest, name: str) -> HttpResponse:
    """Start authorizing Hermes to the server `name`: redirects to its authorization server."""
    operator = operator_name(request)
    if operator is None:
        return HttpResponseForbidden("Connecting a server needs an operator identity.")
    configs, _ = _servers()
    config = next((config for config in configs if config.name == name), None)
    if config is None or config.oauth is None or not config.oauth.interactive:
        raise Http404("no MCP server of that name is connected by an operator")
    redirect_uri = request.build_absolute_uri(reverse("controlroom:server_callback"))
    try:
        authorization_url = connect_start(config, operator=operator, redirect_uri=redirect_uri)
    except ConnectError as exc:
        return _page(request, error=f"Connecting {name} failed: {exc}", status=502)
    return HttpResponseRedirect(authorization_url)


@require_GET
def server_callback(request: HttpRequest) -> HttpResponse:
    """Where the authorization server sends the operator back: completes the flow, shows how it ended."""
    operator = operator_name(request)
    state = request.GET.get("state", "")
    if operator is None:
        return HttpResponseForbidden("Completing an authorization needs an operator identity.")
    authorization = connect_finish(
        state=state,
        code=request.GET.get("code"),
        iss=request.GET.get("iss"),
        error=request.GET.get("error"),
        wait=_EXCHANGE_WAIT_SECONDS,
        operator=operator,
    )
    if authorization is None:
        return _page(request, error="This authorization was not started here; connect the server again.", status=400)
    return HttpResponseRedirect(f"{reverse('controlroom:servers')}?authorization={authorization.pk}")
