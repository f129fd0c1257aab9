from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.conf import settings
from django.contrib.auth.models import User
from django.db import connections
from django.test import Client

from agent import presence

pytest_plugins = [
    "tests.fakes.fixtures",
    "tests.fakes.mcp_fixtures",
    "tests.fakes.oikos_fixtures",
    "tests.fakes.channel_layers",
]


@pytest.fixture(scope="session")
def django_db_modify_db_settings(
    django_db_modify_db_settings_parallel_suffix: None, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """On SQLite, the test database is a file, as Hermes's own database is, not Django's default
    in-memory database in shared-cache mode: that one locks whole tables and fails a second writer
    at once ("database table is locked") instead of making it wait, which no deployment does.
    A turn's writes and a watcher's or a request's run on different threads, as they do in production."""
    database = settings.DATABASES["default"]
    if database["ENGINE"] == "django.db.backends.sqlite3":
        database.setdefault("TEST", {})["NAME"] = str(tmp_path_factory.mktemp("database") / "hermes-test.sqlite3")


@pytest.fixture(scope="session", autouse=True)
def _async_database_connections_closed(django_db_setup: None, django_db_blocker: Any) -> Iterator[None]:
    """Close the connection that async code kept open, so the test database can be dropped.

    `database_sync_to_async` runs every query of async code on one executor thread, whose
    persistent connection (CONN_MAX_AGE) would otherwise outlive the run and block the teardown.
    """
    yield
    # Torn down before the test database (this fixture depends on its setup).
    with django_db_blocker.unblock():
        asyncio.run(database_sync_to_async(connections.close_all)())
        # On PostgreSQL, this process's presence lock holds a connection of its own.
        presence.presence_stop()


@pytest.fixture
def auditor(client: Client) -> Client:
    """A Django test client signed in as a superuser: the admin as an auditor reads it."""
    client.force_login(User.objects.create_superuser("auditor", "auditor@example.org", "pw"))
    return client
