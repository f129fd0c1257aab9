"""Model fields that redact configured secrets on the way to the database.

Every column that holds text from outside Hermes — a peer's message, a tool's arguments and result,
a model's content, an error, a session's title, an Oikos event — is one of these (every other text
column is named with a reason in tests/security/test_stored_redaction.py), so no write path can
store a secret raw: `create()`, `save()` and `QuerySet.update()` all pass the value through
`get_prep_value`, which applies `common.redaction.redact_value` (the same function the logs, the
model requests and the tool hub use). Callers that echo what they stored (GarraIA's task JSON,
the admin, `/ui/ledger/`) read the redacted value back.

Redaction is behaviour, not schema: the columns are exactly their base fields', so `deconstruct()`
names the base class and migrations never see these (a field swap needs no migration, and the
migrations do not import this module).
"""

from __future__ import annotations

from typing import Any

from django.db import models

from common.redaction import redact_value


class RedactedCharField(models.CharField):
    """A short text (a title, a peer's id) redacted, then cut to `max_length`.

    `[REDACTED]` can be longer than the secret it replaces; cutting after redaction never leaves a
    part of a secret. Lookups pass through `get_prep_value` too, so a filter finds what was stored.
    """

    def get_prep_value(self, value: Any) -> Any:
        value = super().get_prep_value(redact_value(value))
        if isinstance(value, str) and self.max_length is not None and len(value) > self.max_length:
            return value[: self.max_length]
        return value

    def pre_save(self, model_instance: models.Model, add: bool) -> Any:
        # The saved object is shown right after (a new session's title in the page and the API):
        # it holds what the row holds, not the raw text it was built with.
        value = self.get_prep_value(super().pre_save(model_instance, add))
        setattr(model_instance, self.attname, value)
        return value

    def deconstruct(self) -> Any:
        name, _path, args, kwargs = super().deconstruct()
        return name, "django.db.models.CharField", args, kwargs


class RedactedTextField(models.TextField):
    def get_prep_value(self, value: Any) -> Any:
        return super().get_prep_value(redact_value(value))

    def deconstruct(self) -> Any:
        name, _path, args, kwargs = super().deconstruct()
        return name, "django.db.models.TextField", args, kwargs


class RedactedJSONField(models.JSONField):
    """Every string inside the JSON value (keys, their values, list items, nested) is redacted."""

    def get_prep_value(self, value: Any) -> Any:
        return super().get_prep_value(redact_value(value))

    def deconstruct(self) -> Any:
        name, _path, args, kwargs = super().deconstruct()
        return name, "django.db.models.JSONField", args, kwargs
