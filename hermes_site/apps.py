from __future__ import annotations

from django.apps import AppConfig


class HermesSiteConfig(AppConfig):
    """The project package as an app, for its `runserver` command only (no models, no ready())."""

    name = "hermes_site"
    verbose_name = "Hermes site"
