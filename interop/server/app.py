"""The A2A ASGI app: both dialects' routes behind `PeerAuthMiddleware`, then `BodyCheckMiddleware`.

`hermes_site/asgi.py` mounts it in front of Django for its paths; everything else stays Django's.
"""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.types import ASGIApp

from interop.server import garraia
from interop.server.a2a import a2a_routes
from interop.server.auth import PeerAuthMiddleware
from interop.server.bodies import BodyCheckMiddleware


def a2a_asgi_app() -> ASGIApp:
    # GarraIA's routes go first: the HTTP+JSON binding ends with a catch-all tenant mount.
    # Who is calling first (a 401 reads no body), then whether the body may be parsed at all.
    return PeerAuthMiddleware(BodyCheckMiddleware(Starlette(routes=[*garraia.routes, *a2a_routes()])))
