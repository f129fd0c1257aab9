"""The one ASGI application Daphne serves: Django views over HTTP, Channels consumers over websockets,
and the A2A endpoints (both dialects) in front of Django for their own paths.

Every connection passes the edge first, whatever it is for — Django, a websocket or an A2A route:
the network check (`access.edge`), then the size limits (`access.limits`). Websockets then pass the
origin check and get their operator (`access.websocket`), as HTTP requests do in Django's
middleware (`access.middleware`); the A2A routes check their own pairing tokens.
"""

from __future__ import annotations

import os
from typing import Any, cast

import django
from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hermes_site.settings")

# Django must be set up before anything imports models (consumers, routing).
django.setup(set_prefix=False)

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.conf import settings  # noqa: E402
from django.urls import re_path  # noqa: E402

from access.edge import mesh_only  # noqa: E402
from access.exposure import exposure_warn_at_startup  # noqa: E402
from access.limits import size_limits  # noqa: E402
from access.websocket import websocket_guard, websocket_path_unknown  # noqa: E402
from controlroom.routing import websocket_urlpatterns as controlroom_websockets  # noqa: E402
from hermes_site.path_router import App, PathRouter  # noqa: E402
from interop.server.app import a2a_asgi_app  # noqa: E402

# Any other path is refused at the handshake (Channels' router would raise, and Daphne answer 500).
# (`re_path` is typed for Django views; Channels routes ASGI apps with it.)
websocket_urlpatterns: list = [*controlroom_websockets, re_path(r"^.*$", cast(Any, websocket_path_unknown))]


def application_build() -> Any:
    """The whole application. Built once below for Daphne; tests that change a setting Django's
    middleware reads at start-up (SECURE_SSL_REDIRECT, ...) build a fresh one."""
    django_app = get_asgi_application()
    http_app: App = django_app
    if settings.HERMES_A2A_SERVE:
        a2a_app = a2a_asgi_app()
        http_app = PathRouter(
            [
                ("/.well-known/agent-card.json", a2a_app),  # A2A 1.0 agent card
                ("/.well-known/agent.json", a2a_app),  # GarraIA agent card
                ("/a2a/", a2a_app),  # JSON-RPC, HTTP+JSON (/a2a/rest/), GarraIA tasks (/a2a/tasks)
            ],
            default=django_app,
        )
    return mesh_only(
        size_limits(
            ProtocolTypeRouter(
                {
                    "http": http_app,
                    "websocket": websocket_guard(URLRouter(websocket_urlpatterns)),
                }
            )
        )
    )


application = application_build()

exposure_warn_at_startup()
