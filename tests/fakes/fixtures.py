"""Pytest fixtures for the fakes; registered in `tests/conftest.py` through `pytest_plugins`."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest
from pytest_django.fixtures import Settings

from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.daphne import DaphneServer, LiveDatabase
from tests.fakes.mcp_servers import MCPTestServer
from tests.fakes.subprocesses import clean_environ, sqlite_copy, sqlite_migrated


@pytest.fixture
def fake_llm() -> Iterator[FakeAnthropic]:
    """A running scripted Messages API; stopped (its streams ended) after the test."""
    with FakeAnthropic() as fake:
        yield fake


@pytest.fixture
def llm(fake_llm: FakeAnthropic, settings: Settings) -> FakeAnthropic:
    """The scripted model, configured as Hermes's LLM for code running in this process."""
    settings.ANTHROPIC_BASE_URL = fake_llm.url
    settings.ANTHROPIC_API_KEY = fake_llm.api_key
    return fake_llm


@pytest.fixture(scope="session")
def migrated_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated SQLite file, made once per run; the fixtures below hand out copies of it."""
    path = tmp_path_factory.mktemp("hermes-db") / "template.sqlite3"
    sqlite_migrated(path)
    return path


@pytest.fixture(scope="module")
def module_database(migrated_template: Path, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A migrated database URL that the Hermes processes of one test module share."""
    return sqlite_copy(migrated_template, tmp_path_factory.mktemp("db") / "hermes.sqlite3")


@pytest.fixture
def fresh_database(migrated_template: Path, tmp_path: Path) -> str:
    """A migrated database URL for the Hermes processes of one test."""
    return sqlite_copy(migrated_template, tmp_path / "hermes.sqlite3")


@pytest.fixture
def manage_env(module_database: str, fake_llm: FakeAnthropic, mcp_http_server: MCPTestServer) -> dict[str, str]:
    """The environment of a `manage.py` process: the scripted model, the test MCP server as Oikos,
    the module's database, and nothing else of Hermes's configuration."""
    return {
        **clean_environ(),
        **fake_llm.env(),
        "DATABASE_URL": module_database,
        "OIKOS_MCP_URL": mcp_http_server.url,
        "OIKOS_MCP_TOKEN": mcp_http_server.token,
    }


@pytest.fixture(scope="session")
def live_database(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveDatabase]:
    """A migrated database for server subprocesses, shared by the run (see `tests/fakes/daphne.py`).

    Tests sharing it compare row counts before and after instead of expecting it empty.
    """
    database = LiveDatabase.create(tmp_path_factory.mktemp("live-database"))
    yield database
    database.drop()


@pytest.fixture
def daphne_server(live_database: LiveDatabase, tmp_path: Path) -> Iterator[Callable[..., DaphneServer]]:
    """Start Hermes under Daphne: `daphne_server(env={...}, database=None) -> DaphneServer`.

    Returns once `/healthz` answers; `server.url` is `http://127.0.0.1:<port>`. `env` is added to a
    scrubbed environment (e.g. `fake_llm.env()`, `OIKOS_MCP_URL`/`OIKOS_MCP_TOKEN`,
    `HERMES_URL_PREFIX`); `database` defaults to `live_database`. Every server is stopped after
    the test.
    """
    servers: list[DaphneServer] = []

    def start(*, env: Mapping[str, str] | None = None, database: LiveDatabase | None = None) -> DaphneServer:
        server = DaphneServer(
            database=database or live_database,
            env=env,
            log_path=tmp_path / f"daphne-{len(servers)}.log",
        )
        servers.append(server)
        return server.start()

    yield start
    for server in servers:
        server.close()
