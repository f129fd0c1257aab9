"""The one ASGI application Daphne serves: Django views over HTTP, Channels consumers over websockets,
and the A2A endpoints (both dialects) in front of Django for their own paths."""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hermes_site.settings")

# Django must be set up before anything imports models (consumers, routing).
django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.conf import settings  # noqa: E402

from controlroom.routing import websocket_urlpatterns as controlroom_websockets  # noqa: E402
from hermes_site.path_router import App, PathRouter  # noqa: E402
from interop.server.app import a2a_asgi_app  # noqa: E402

websocket_urlpatterns: list = [*controlroom_websockets]

http_app: App = django_asgi_app
if settings.HERMES_A2A_SERVE:
    a2a_app = a2a_asgi_app()
    http_app = PathRouter(
        [
            ("/.well-known/agent-card.json", a2a_app),  # A2A 1.0 agent card
            ("/.well-known/agent.json", a2a_app),  # GarraIA agent card
            ("/a2a/", a2a_app),  # JSON-RPC, HTTP+JSON (/a2a/rest/), GarraIA tasks (/a2a/tasks)
        ],
        default=django_asgi_app,
    )

application = ProtocolTypeRouter(
    {
        "http": http_app,
        "websocket": AllowedHostsOriginValidator(URLRouter(websocket_urlpatterns)),
    }
)
