"""The one ASGI application Daphne serves: Django views over HTTP, Channels consumers over websockets.

Every connection passes the edge first, whatever it is for: the network check (`access.edge`), then
the size limits (`access.limits`). Websockets then pass the origin check and get their operator
(`access.websocket`), as HTTP requests do in Django's middleware (`access.middleware`).
"""

from __future__ import annotations

import os
from typing import Any

import django
from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hermes_site.settings")

# Django must be set up before anything imports models (consumers, routing).
django.setup(set_prefix=False)

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from access.edge import mesh_only  # noqa: E402
from access.exposure import exposure_warn_at_startup  # noqa: E402
from access.limits import size_limits  # noqa: E402
from access.websocket import websocket_guard  # noqa: E402

websocket_urlpatterns: list = []


def application_build() -> Any:
    """The whole application. Built once below for Daphne; tests that change a setting Django's
    middleware reads at start-up (SECURE_SSL_REDIRECT, ...) build a fresh one."""
    return mesh_only(
        size_limits(
            ProtocolTypeRouter(
                {
                    "http": get_asgi_application(),
                    "websocket": websocket_guard(URLRouter(websocket_urlpatterns)),
                }
            )
        )
    )


application = application_build()

exposure_warn_at_startup()
