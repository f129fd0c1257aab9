"""Redacting rows stored before their columns redacted on write: for data migrations.

A column that becomes redacting (`agent.fields`) redacts what is written from then on; what an
earlier version stored stays raw until it is rewritten. Each app's `00NN_stored_redact` migration
passes its columns here, with the secrets configured when it runs (settings, `HERMES_REDACT`, and
the MCP servers' credentials from their config file). Only rows that change are written.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from typing import Any

from agent.tools.config import MCPConfigError, mcp_servers_from_settings
from common.redaction import redact_value, secret_values, secrets_register


def stored_columns_redact(apps: Any, columns: Iterable[tuple[str, str, tuple[str, ...]]]) -> None:
    """Rewrite, redacted, every row of `(app, model, columns)` whose columns hold a configured secret.

    `apps` is the migration's model registry. Char columns are cut to their length after redaction
    (`[REDACTED]` can be longer than the secret it replaced), as `RedactedCharField` does.
    """
    # A broken MCP config file only loses its own credentials here; Hermes reports it at start-up.
    with contextlib.suppress(MCPConfigError):
        secrets_register(value for server in mcp_servers_from_settings() for value in server.secret_values())
    if not secret_values():
        return
    for app, name, names in columns:
        model = apps.get_model(app, name)
        lengths = {column: model._meta.get_field(column).max_length for column in names}
        for row in model.objects.only("pk", *names).iterator(chunk_size=500):
            changed = {}
            for column in names:
                value = getattr(row, column)
                redacted = redact_value(value)
                if redacted != value:
                    limit = lengths[column]
                    changed[column] = redacted[:limit] if limit and isinstance(redacted, str) else redacted
            if changed:
                model.objects.filter(pk=row.pk).update(**changed)
