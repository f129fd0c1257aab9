"""Model fields that redact configured secrets on the way to the database.

Every column that holds text from outside Hermes — a peer's message, a tool's arguments and result,
a model's content, an error — is one of these, so no write path can store a secret raw: `create()`,
`save()` and `QuerySet.update()` all pass the value through `get_prep_value`, which applies
`agent.redaction.redact_value` (the same function the logs, the model requests and the tool hub
use). Callers that echo what they stored (GarraIA's task JSON, the admin, `/ui/ledger/`) read the
redacted value back.

Redaction is behaviour, not schema: the columns are exactly their base fields', so `deconstruct()`
names the base class and migrations never see these (a field swap needs no migration, and the
migrations do not import this module).
"""

from __future__ import annotations

from typing import Any

from django.db import models

from agent.redaction import redact_value


class RedactedTextField(models.TextField):
    def get_prep_value(self, value: Any) -> Any:
        return super().get_prep_value(redact_value(value))

    def deconstruct(self) -> Any:
        name, _path, args, kwargs = super().deconstruct()
        return name, "django.db.models.TextField", args, kwargs


class RedactedJSONField(models.JSONField):
    """Every string inside the JSON value (keys' values, list items, nested) is redacted."""

    def get_prep_value(self, value: Any) -> Any:
        return super().get_prep_value(redact_value(value))

    def deconstruct(self) -> Any:
        name, _path, args, kwargs = super().deconstruct()
        return name, "django.db.models.JSONField", args, kwargs
