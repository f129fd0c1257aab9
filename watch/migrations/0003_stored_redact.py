"""Redact the configured secrets that earlier versions stored raw in the watcher's and the agent's rows.

An Oikos signal's text was kept raw in the event, the investigation (its title, event, storm
events, escalation) and the session title; JSON keys were never redacted (the ledger, messages,
elicitations, the tool catalog). Those columns redact on write now (`agent.fields`); this rewrites
what is already there (`agent.stored_redaction`).

Not reversible: a redacted secret cannot be put back. Rows without a secret are left untouched.
"""

from __future__ import annotations

from typing import Any

from django.db import migrations
from django.db.backends.base.schema import BaseDatabaseSchemaEditor

# (app, model, columns) that hold outside text and were stored raw (or with their JSON keys raw).
STORED_RAW = (
    ("watch", "WatchedEvent", ("data",)),
    ("watch", "Investigation", ("entity", "kind", "severity", "title", "event", "storm_events", "escalation")),
    ("agent", "AgentSession", ("title",)),
    ("agent", "Message", ("content",)),
    ("agent", "Activity", ("arguments", "result")),
    ("agent", "ToolCatalog", ("tools",)),
    ("agent", "Elicitation", ("reason", "requested_schema", "fields", "content")),
)


def stored_secrets_redact(apps: Any, schema_editor: BaseDatabaseSchemaEditor | None) -> None:
    from agent.stored_redaction import stored_columns_redact

    stored_columns_redact(apps, STORED_RAW)


class Migration(migrations.Migration):
    dependencies = [
        ("agent", "0010_ledger_keyset_indexes"),
        ("watch", "0002_backlog_outcome"),
    ]

    operations = [migrations.RunPython(stored_secrets_redact, migrations.RunPython.noop, elidable=True)]
