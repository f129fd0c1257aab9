"""The ledger row's state (started / ok / error / unknown): rows written before it existed finished."""

from __future__ import annotations

from typing import Any

from django.db import migrations, models


def _errors_marked(apps: Any, schema_editor: Any) -> None:
    Activity = apps.get_model("agent", "Activity")
    Activity.objects.filter(is_error=True).update(state="error")


class Migration(migrations.Migration):
    dependencies = [("agent", "0002_tool_catalog")]

    operations = [
        migrations.AddField(
            model_name="activity",
            name="state",
            field=models.CharField(
                choices=[("started", "in flight"), ("ok", "ok"), ("error", "error"), ("unknown", "outcome unknown")],
                default="ok",
                max_length=10,
            ),
        ),
        migrations.RunPython(_errors_marked, migrations.RunPython.noop),
    ]
