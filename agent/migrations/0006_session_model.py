from __future__ import annotations

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("agent", "0005_context"),
    ]

    operations = [
        migrations.AddField(
            model_name="agentsession",
            name="model",
            field=models.CharField(blank=True, max_length=100),
        ),
    ]
