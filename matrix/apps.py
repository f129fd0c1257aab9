from __future__ import annotations

from django.apps import AppConfig


class MatrixConfig(AppConfig):
    name = "matrix"
    verbose_name = "Matrix bridge"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from agent.doctor.checks import check_register
        from matrix.doctor import matrix_check
        from matrix.metrics import matrix_collector_register

        matrix_collector_register()
        check_register("matrix", matrix_check)
