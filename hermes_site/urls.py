from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    # The HTTP API for scripts and peers: /chat, /sessions, /query, /healthz, /openapi.json.
    path("", include("agent.api.urls")),
]
