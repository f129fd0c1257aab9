"""The turn's hot writes as statements made once: what the ORM writes, without its cost per row.

The SQL of each `Insert` and `Update` is made once per database vendor from the model's metadata;
each run prepares only its values, through each field's own `get_db_prep_save` (redaction included).
Run them on a cursor the caller opens, on the database thread (`common.db`), inside the service's
`transaction.atomic()`. Why, and what the ORM does that these do not: docs/architecture.md
("The turn's hot-path writes"); `tests/agent/test_statements.py` checks rows read back as the ORM's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import models
from django.db.backends.utils import CursorWrapper
from django.db.models.fields import AutoFieldMixin
from django.utils import timezone


def _fields_by_attname(model: type[models.Model], names: Sequence[str]) -> list[models.Field[Any, Any]]:
    """The model's concrete fields named by attribute (`session_id` for the `session` key)."""
    fields = {field.attname: field for field in model._meta.concrete_fields}
    unknown = [name for name in names if name not in fields]
    if unknown:
        raise ValueError(f"{model.__name__} has no column {', '.join(unknown)}")
    return [fields[name] for name in names]


class Insert:
    """`INSERT INTO <table> (<every column>) VALUES (...)`, returning the new row's primary key.

    `fields` are the columns a caller gives (by attribute name); every other column takes its
    field's default, or the time of the insert for `auto_now`/`auto_now_add`, as `save()` gives
    them. A primary key the database generates (an auto field) is returned by `RETURNING`; one
    with a Python default (a UUID) is made here unless given.
    """

    def __init__(self, model: type[models.Model], fields: Sequence[str]) -> None:
        self.model = model
        pk = model._meta.pk
        assert pk is not None
        self._pk = pk
        self._pk_generated = isinstance(pk, AutoFieldMixin)
        self._given = _fields_by_attname(model, fields)
        given = {field.attname for field in self._given}
        self._pk_made = not self._pk_generated and pk.attname not in given
        self._defaulted = [
            field for field in model._meta.concrete_fields if field.attname not in given and not field.primary_key
        ]
        self._sql: dict[str, str] = {}

    def run(self, cursor: CursorWrapper, /, **values: Any) -> Any:
        connection = cursor.db
        params: list[Any] = []
        pk_value = values.get(self._pk.attname)
        if self._pk_made:
            pk_value = self._pk.get_default()
            params.append(self._pk.get_db_prep_save(pk_value, connection))
        for field in self._given:
            params.append(field.get_db_prep_save(values[field.attname], connection))
        now = None
        for field in self._defaulted:
            if getattr(field, "auto_now", False) or getattr(field, "auto_now_add", False):
                now = now or timezone.now()
                value = now
            else:
                value = field.get_default()
            params.append(field.get_db_prep_save(value, connection))
        cursor.execute(self._sql_for(connection), params)
        if self._pk_generated:
            if connection.features.can_return_columns_from_insert:
                return cursor.fetchone()[0]
            return connection.ops.last_insert_id(cursor, self.model._meta.db_table, self._pk.column)
        return pk_value

    def _sql_for(self, connection: Any) -> str:
        sql = self._sql.get(connection.vendor)
        if sql is None:
            quote = connection.ops.quote_name
            columns = ([self._pk] if self._pk_made else []) + self._given + self._defaulted
            sql = (
                f"INSERT INTO {quote(self.model._meta.db_table)} ({', '.join(quote(f.column) for f in columns)}) "
                f"VALUES ({', '.join(['%s'] * len(columns))})"
            )
            if self._pk_generated and connection.features.can_return_columns_from_insert:
                sql += f" RETURNING {quote(self._pk.column)}"
            self._sql[connection.vendor] = sql
        return sql


class Update:
    """`UPDATE <table> SET <fields> WHERE <each of where> = ...`; returns the rows changed.

    `fields` are set to the values given (prepared as `update()` prepares them); `appended` are
    text columns given text to add at their end; `where` are the columns compared for equality.
    """

    def __init__(
        self,
        model: type[models.Model],
        fields: Sequence[str] = (),
        *,
        where: Sequence[str],
        appended: Sequence[str] = (),
    ) -> None:
        if not fields and not appended:
            raise ValueError("an update sets at least one column")
        self.model = model
        self._set = _fields_by_attname(model, fields)
        self._appended = _fields_by_attname(model, appended)
        self._where = _fields_by_attname(model, where)
        self._sql: dict[str, str] = {}

    def run(self, cursor: CursorWrapper, /, *, where: Sequence[Any], **values: Any) -> int:
        connection = cursor.db
        params = [field.get_db_prep_save(values[field.attname], connection) for field in self._set]
        params += [field.get_db_prep_save(values[field.attname], connection) for field in self._appended]
        params += [
            field.get_db_prep_value(value, connection, prepared=False)
            for field, value in zip(self._where, where, strict=True)
        ]
        cursor.execute(self._sql_for(connection), params)
        return int(cursor.rowcount)

    def _sql_for(self, connection: Any) -> str:
        sql = self._sql.get(connection.vendor)
        if sql is None:
            quote = connection.ops.quote_name
            assignments = [f"{quote(field.column)} = %s" for field in self._set]
            assignments += [f"{quote(field.column)} = {quote(field.column)} || %s" for field in self._appended]
            conditions = " AND ".join(f"{quote(field.column)} = %s" for field in self._where)
            sql = f"UPDATE {quote(self.model._meta.db_table)} SET {', '.join(assignments)} WHERE {conditions}"
            self._sql[connection.vendor] = sql
        return sql
