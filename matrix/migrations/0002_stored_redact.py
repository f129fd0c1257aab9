"""Redact the configured secrets that earlier versions stored raw in Matrix approval cards.

A card's request (Oikos's action, target and reason) and its detail were kept raw. Those columns
redact on write now (`agent.fields`); this rewrites what is already there
(`agent.stored_redaction`).

Not reversible: a redacted secret cannot be put back. Rows without a secret are left untouched.
"""

from __future__ import annotations

from typing import Any

from django.db import migrations
from django.db.backends.base.schema import BaseDatabaseSchemaEditor

# (app, model, columns) that hold outside text and were stored raw.
STORED_RAW = (("matrix", "MatrixApprovalCard", ("request", "detail")),)


def stored_secrets_redact(apps: Any, schema_editor: BaseDatabaseSchemaEditor | None) -> None:
    from agent.stored_redaction import stored_columns_redact

    stored_columns_redact(apps, STORED_RAW)


class Migration(migrations.Migration):
    dependencies = [
        ("agent", "0010_ledger_keyset_indexes"),
        ("matrix", "0001_initial"),
    ]

    operations = [migrations.RunPython(stored_secrets_redact, migrations.RunPython.noop, elidable=True)]
