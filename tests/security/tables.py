"""Every table of a live database, read from the test process: to dump them all, or count rows."""

from __future__ import annotations

from tests.fakes.daphne import LiveDatabase


def tables(database: LiveDatabase) -> list[str]:
    if database.is_postgres:
        return [row[0] for row in database.query("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")]
    return [row[0] for row in database.query("SELECT name FROM sqlite_master WHERE type = 'table'")]


def row_counts(database: LiveDatabase) -> dict[str, int]:
    """Rows in every table (Django's, Hermes's, interop's): equal before and after = nothing written."""
    return {table: database.query(f'SELECT COUNT(*) FROM "{table}"')[0][0] for table in tables(database)}
