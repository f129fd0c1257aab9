from __future__ import annotations

from django.apps import AppConfig


class WatchConfig(AppConfig):
    name = "watch"
    verbose_name = "proactive investigations"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from agent.doctor.checks import check_register
        from watch.doctor import schedules_check, watcher_check
        from watch.metrics import schedule_collector_register, watch_collector_register

        watch_collector_register()
        schedule_collector_register()
        check_register("watcher", watcher_check)
        check_register("schedules", schedules_check)
