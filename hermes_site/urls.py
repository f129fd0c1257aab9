from __future__ import annotations

from django.contrib import admin
from django.urls import path

from agent.metrics_view import metrics

urlpatterns = [
    path("admin/", admin.site.urls),
    path("metrics", metrics, name="metrics"),
]
