"""Redact the configured secrets that earlier versions stored raw in the control room's rows.

Oikos's answers (an approval's detail, a target's blast radius and executions, why they could not
be fetched) and operators' reasons were kept raw. Those columns redact on write now
(`agent.fields`); this rewrites what is already there (`agent.stored_redaction`).

Not reversible: a redacted secret cannot be put back. Rows without a secret are left untouched.
"""

from __future__ import annotations

from typing import Any

from django.db import migrations
from django.db.backends.base.schema import BaseDatabaseSchemaEditor

# (app, model, columns) that hold outside text and were stored raw.
STORED_RAW = (
    ("controlroom", "ApprovalDecision", ("reason", "detail")),
    ("controlroom", "TargetContext", ("blast_radius", "executions", "blast_problem", "executions_problem")),
)


def stored_secrets_redact(apps: Any, schema_editor: BaseDatabaseSchemaEditor | None) -> None:
    from agent.stored_redaction import stored_columns_redact

    stored_columns_redact(apps, STORED_RAW)


class Migration(migrations.Migration):
    dependencies = [
        ("agent", "0010_ledger_keyset_indexes"),
        ("controlroom", "0003_target_context"),
    ]

    operations = [migrations.RunPython(stored_secrets_redact, migrations.RunPython.noop, elidable=True)]
