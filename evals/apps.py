from __future__ import annotations

from django.apps import AppConfig


class EvalsConfig(AppConfig):
    name = "evals"
    verbose_name = "evals"
    default_auto_field = "django.db.models.BigAutoField"
