from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

from agent.metrics_view import metrics

urlpatterns = [
    path("admin/", admin.site.urls),
    # Prometheus scrapes this process's metrics here.
    path("metrics", metrics, name="metrics"),
    # The HTTP API for scripts and peers: /chat, /sessions, /query, /healthz, /openapi.json.
    path("", include("agent.api.urls")),
]
