from __future__ import annotations

from django.apps import AppConfig


class ApiConfig(AppConfig):
    """The HTTP API (`/chat`, `/sessions`, `/query`, ...) and the `export_session` command."""

    name = "api"
    verbose_name = "HTTP API"
