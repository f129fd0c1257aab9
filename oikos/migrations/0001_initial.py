"""The approval audit and the target-context cache move here from `controlroom`: state only.

Their tables keep their names (`controlroom_approval_decisions`, `controlroom_target_contexts`),
so no row moves; only Django's idea of which app owns them changes, content types included.
"""

from django.db import migrations, models

MODELS = ("approvaldecision", "targetcontext")


def _content_types_move(apps, source: str, target: str) -> None:
    ContentType = apps.get_model("contenttypes", "ContentType")
    for model in MODELS:
        if not ContentType.objects.filter(app_label=target, model=model).exists():
            ContentType.objects.filter(app_label=source, model=model).update(app_label=target)


def content_types_follow(apps, schema_editor) -> None:
    """Permissions and admin history follow the models to their new app."""
    _content_types_move(apps, "controlroom", "oikos")


def content_types_return(apps, schema_editor) -> None:
    _content_types_move(apps, "oikos", "controlroom")


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("contenttypes", "0002_remove_content_type_name"),
        ("controlroom", "0004_stored_redact"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="TargetContext",
                    fields=[
                        ("target", models.CharField(max_length=200, primary_key=True, serialize=False)),
                        ("blast_radius", models.JSONField(default=list)),
                        ("executions", models.JSONField(default=list)),
                        ("blast_problem", models.TextField(blank=True)),
                        ("executions_problem", models.TextField(blank=True)),
                        ("fetched_at", models.DateTimeField()),
                    ],
                    options={
                        "db_table": "controlroom_target_contexts",
                    },
                ),
                migrations.CreateModel(
                    name="ApprovalDecision",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("approval_id", models.CharField(max_length=100)),
                        ("execution_id", models.CharField(blank=True, max_length=100)),
                        (
                            "decision",
                            models.CharField(choices=[("approve", "Approve"), ("deny", "Deny")], max_length=10),
                        ),
                        ("operator", models.CharField(max_length=150)),
                        ("reason", models.TextField(blank=True)),
                        (
                            "outcome",
                            models.CharField(
                                choices=[
                                    ("decided", "Decided"),
                                    ("already_decided", "Already decided"),
                                    ("refused", "Refused by Oikos"),
                                    ("failed", "Oikos unreachable or failing"),
                                    ("rejected", "Refused by Hermes"),
                                ],
                                max_length=20,
                            ),
                        ),
                        ("detail", models.TextField(blank=True)),
                        ("decided_at", models.DateTimeField(auto_now_add=True)),
                    ],
                    options={
                        "db_table": "controlroom_approval_decisions",
                        "ordering": ["-decided_at", "-id"],
                        "indexes": [models.Index(fields=["approval_id"], name="cr_decision_approval_idx")],
                    },
                ),
            ],
        ),
        migrations.RunPython(content_types_follow, content_types_return),
    ]
