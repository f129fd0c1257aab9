from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("agent", "0001_initial"),
    ]

    operations = [
        migrations.CreateModel(
            name="ToolCatalog",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("server", models.CharField(max_length=100, unique=True)),
                ("target", models.TextField()),
                ("tools", models.JSONField(default=list)),
                ("listed_at", models.DateTimeField()),
            ],
            options={
                "verbose_name": "tool catalog",
                "db_table": "agent_tool_catalog",
            },
        ),
    ]
