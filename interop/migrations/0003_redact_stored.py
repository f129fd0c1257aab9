"""Redact the configured secrets that earlier versions stored raw.

Before `agent.fields`, a secret pasted into an A2A message was kept raw in the peer exchanges and
the A2A task store, and `/query` arguments in the ledger. From now on those columns redact on
write; this rewrites what is already there, with the secrets configured when it runs (settings,
`HERMES_REDACT`, and the MCP servers' credentials when their config file loads). Rows without a
secret are left untouched. Not reversible: a redacted secret cannot be put back.
"""

from __future__ import annotations

import contextlib
from typing import Any

from django.db import migrations
from django.db.backends.base.schema import BaseDatabaseSchemaEditor

# (app, model, columns) that held outside text stored raw.
STORED_RAW = (
    ("interop", "PeerExchange", ("message", "reply", "error")),
    ("interop", "A2ATask", ("data",)),
    ("agent", "Activity", ("arguments", "result")),
)


def stored_secrets_redact(apps: Any, schema_editor: BaseDatabaseSchemaEditor | None) -> None:
    from agent.tools.config import MCPConfigError, mcp_servers_from_settings
    from common.redaction import redact_value, secret_values, secrets_register

    # A broken MCP config file only loses its own credentials here; Hermes reports it at start-up.
    with contextlib.suppress(MCPConfigError):
        secrets_register(value for server in mcp_servers_from_settings() for value in server.secret_values())
    if not secret_values():
        return
    for app, name, columns in STORED_RAW:
        model = apps.get_model(app, name)
        for row in model.objects.only("pk", *columns).iterator(chunk_size=500):
            changed = {}
            for column in columns:
                value = getattr(row, column)
                redacted = redact_value(value)
                if redacted != value:
                    changed[column] = redacted
            if changed:
                model.objects.filter(pk=row.pk).update(**changed)


class Migration(migrations.Migration):
    dependencies = [
        ("agent", "0004_turn_owner"),
        ("interop", "0002_a2a_task_version_turn"),
    ]

    operations = [migrations.RunPython(stored_secrets_redact, migrations.RunPython.noop, elidable=True)]
