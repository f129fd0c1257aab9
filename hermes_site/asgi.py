"""The one ASGI application Daphne serves: Django views over HTTP, Channels consumers over websockets.

Every connection passes the edge first (`access.edge.mesh_only`: the network check), whatever it is
for; websockets then pass the origin check and get their operator (`access.websocket`), as HTTP
requests do in Django's middleware (`access.middleware`).
"""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hermes_site.settings")

# Django must be set up before anything imports models (consumers, routing).
django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from access.edge import mesh_only  # noqa: E402
from access.exposure import exposure_warn_at_startup  # noqa: E402
from access.websocket import websocket_guard  # noqa: E402

websocket_urlpatterns: list = []

application = mesh_only(
    ProtocolTypeRouter(
        {
            "http": django_asgi_app,
            "websocket": websocket_guard(URLRouter(websocket_urlpatterns)),
        }
    )
)

exposure_warn_at_startup()
