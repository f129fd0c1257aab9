from __future__ import annotations

from django.apps import AppConfig


class ControlRoomConfig(AppConfig):
    name = "controlroom"
    verbose_name = "Control room"
    default_auto_field = "django.db.models.BigAutoField"
