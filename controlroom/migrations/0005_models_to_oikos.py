"""`ApprovalDecision` and `TargetContext` now belong to the `oikos` app: state only, tables untouched."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("controlroom", "0004_stored_redact"),
        ("oikos", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.DeleteModel(name="ApprovalDecision"),
                migrations.DeleteModel(name="TargetContext"),
            ],
        ),
    ]
