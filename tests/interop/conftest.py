"""Fixtures for interop tests: a scripted model and Hermes under Daphne per test module.

Hermes processes under test (Daphne, `manage.py`) get a copy of one migrated SQLite file
(`module_database`, `fresh_database`) and reach their own `FakeAnthropic` through the environment.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

import pytest

from tests.fakes import FakeAnthropic
from tests.fakes.daphne import DaphneServer, LiveDatabase


@pytest.fixture(scope="module")
def module_llm() -> Iterator[FakeAnthropic]:
    """A scripted model shared by one module's Hermes processes; tests set `responder` or enqueue."""
    with FakeAnthropic() as fake:
        yield fake


@pytest.fixture
def peer_llm(module_llm: FakeAnthropic) -> Iterator[FakeAnthropic]:
    """The module's scripted model, its responder cleared after the test."""
    yield module_llm
    module_llm.responder = None


@pytest.fixture(scope="module")
def module_daphne(
    module_database: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[[Mapping[str, str]], DaphneServer]]:
    """Start Hermes under Daphne on `module_database`: `module_daphne(env) -> DaphneServer`.

    Returns once it answers; every server started is stopped after the module's last test.
    """
    servers: list[DaphneServer] = []
    directory = tmp_path_factory.mktemp("daphne")

    def start(env: Mapping[str, str]) -> DaphneServer:
        server = DaphneServer(
            database=LiveDatabase(module_database), env=env, log_path=directory / f"daphne-{len(servers)}.log"
        )
        servers.append(server)
        return server.start()

    yield start
    for server in servers:
        server.close()
