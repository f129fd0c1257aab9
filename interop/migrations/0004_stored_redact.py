"""Redact the configured secrets that earlier versions stored raw in peers' ids and task keys.

A peer's thread and task ids (GarraIA task id, A2A contextId, the remote task's id and state) were
kept raw, and the A2A task store's JSON keys were never redacted. Those columns redact on write now
(`agent.fields`); this rewrites what is already there (`agent.stored_redaction`).

Not reversible: a redacted secret cannot be put back. Rows without a secret are left untouched.
"""

from __future__ import annotations

from typing import Any

from django.db import migrations
from django.db.backends.base.schema import BaseDatabaseSchemaEditor

# (app, model, columns) that hold outside text and were stored raw (or with their JSON keys raw).
STORED_RAW = (
    ("interop", "PeerConversation", ("external_id", "remote_task_id", "remote_state")),
    ("interop", "A2ATask", ("context_id", "data")),
)


def stored_secrets_redact(apps: Any, schema_editor: BaseDatabaseSchemaEditor | None) -> None:
    from agent.stored_redaction import stored_columns_redact

    stored_columns_redact(apps, STORED_RAW)


class Migration(migrations.Migration):
    dependencies = [
        ("agent", "0010_ledger_keyset_indexes"),
        ("interop", "0003_redact_stored"),
    ]

    operations = [migrations.RunPython(stored_secrets_redact, migrations.RunPython.noop, elidable=True)]
