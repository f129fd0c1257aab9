"""PostgreSQL connections of a Hermes process stay within its pool, whatever the load.

Under Daphne every request runs on a thread of its own, and Django keeps one connection per thread:
before the pool, each `/chat` stream held a connection of its own until it ended, and those left
behind outlived their threads, until PostgreSQL refused everyone ("too many clients"). Now every
connection comes from one pool per process (`HERMES_DB_POOL_MAX`); a request that finds it taken
waits `HERMES_DB_POOL_TIMEOUT`, then gets a JSON 503 `database_busy`.

These tests need PostgreSQL (`DATABASE_URL`, as CI sets it); each server gets a database of its own,
so `pg_stat_activity` rows of that database are exactly the server's connections (the probe asks
from the `postgres` database and is not among them).
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx2
import psycopg
import pytest

from tests.fakes import FakeAnthropic, Reply
from tests.fakes.chat_load import ConnectionProbe, chat_wave
from tests.fakes.daphne import DaphneServer, LiveDatabase
from tests.fakes.subprocesses import clean_environ, manage

POOL_MAX = 4
CONCURRENT_CHATS = 30
# Each answer streams for ~2.4 s (6 events, 0.4 s apart), so all thirty turns and their requests'
# threads are alive at once: without the pool, that was one connection per request thread (31).
ANSWER_DELAY = 0.4


@pytest.fixture(scope="module")
def database(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveDatabase]:
    """A database only this module's servers use (one at a time), migrated once."""
    if not os.environ.get("DATABASE_URL", "").startswith(("postgres://", "postgresql://")):
        pytest.skip("the connection pool is PostgreSQL's; DATABASE_URL is not PostgreSQL (CI sets it)")
    database = LiveDatabase.create(tmp_path_factory.mktemp("pool"), name="pool")
    yield database
    database.drop()


def _slow_answer(request: dict[str, Any]) -> Reply:
    return Reply.text("All checked.", chunk=4, delay=ANSWER_DELAY)


async def test_thirty_concurrent_chats_never_hold_more_connections_than_the_pool(
    database: LiveDatabase, tmp_path: Path
) -> None:
    finished_before = _turns_done(database)
    with FakeAnthropic() as model:
        model.responder = _slow_answer
        env = {
            **model.env(),
            "HERMES_DB_POOL_MAX": str(POOL_MAX),
        }
        with (
            DaphneServer(database=database, env=env, log_path=tmp_path / "daphne.log") as hermes,
            ConnectionProbe(database.url, interval=0.05) as probe,
        ):
            wave = await chat_wave(hermes.url, CONCURRENT_CHATS, within=120)
            peak, samples = probe.peak, probe.samples

    print(f"{CONCURRENT_CHATS} concurrent /chat: {wave.done} done in {wave.wall:.1f} s; peak {peak} connections")
    assert wave.problems() == [], hermes.log()[-3000:]
    assert wave.done == CONCURRENT_CHATS
    assert samples > 10, "the probe hardly sampled the wave"
    # The pool, plus the one connection that holds the process's presence lock (agent.presence).
    assert 0 < peak <= POOL_MAX + 1, f"the server held {peak} PostgreSQL connections with HERMES_DB_POOL_MAX={POOL_MAX}"
    assert _turns_done(database) - finished_before == CONCURRENT_CHATS


def _turns_done(database: LiveDatabase) -> int:
    return int(database.query("SELECT count(*) FROM agent_turns WHERE status = 'done'")[0][0])


def test_a_request_that_finds_the_pool_taken_waits_then_gets_a_json_503(database: LiveDatabase, tmp_path: Path) -> None:
    """With the only pooled connection stuck (its query waits on a table lock held here), the next
    request waits the pool's timeout and is answered 503 `database_busy`; the stuck one completes."""
    env = {"HERMES_DB_POOL_MAX": "1", "HERMES_DB_POOL_TIMEOUT": "1"}
    with DaphneServer(database=database, env=env, log_path=tmp_path / "daphne.log") as hermes:
        httpx2.get(f"{hermes.url}/sessions", timeout=10).raise_for_status()  # the operator's user exists
        stuck: dict[str, httpx2.Response] = {}
        with psycopg.connect(database.url) as locker:
            # Every request looks its operator up in auth_user: this one waits for the lock, on the
            # pool's only connection.
            locker.execute("LOCK TABLE auth_user IN ACCESS EXCLUSIVE MODE")
            first = threading.Thread(
                target=lambda: stuck.update(response=httpx2.get(f"{hermes.url}/sessions", timeout=30))
            )
            first.start()
            _wait_for_a_query_blocked_on_a_lock(database)
            refused = httpx2.get(f"{hermes.url}/sessions", timeout=30)
            locker.rollback()
        first.join(timeout=30)

    assert refused.status_code == 503
    assert refused.headers["content-type"] == "application/json"
    assert refused.headers["retry-after"] == "5"
    error = refused.json()["error"]
    assert error["code"] == "database_busy"
    assert "All 1 database connections of this Hermes process stayed in use for 1 s" in error["message"]
    assert stuck["response"].status_code == 200
    assert "Traceback" not in hermes.log()


def _wait_for_a_query_blocked_on_a_lock(database: LiveDatabase, *, within: float = 20.0) -> None:
    """Poll `pg_stat_activity` until a backend of the server waits on a lock (another process's state)."""
    with psycopg.connect(database.url, autocommit=True) as observer:
        for _ in range(int(within / 0.05)):
            row = observer.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
            ).fetchone()
            if row and row[0]:
                return
            time.sleep(0.05)
    raise AssertionError(f"no query of the server waited on the lock within {within:g} s")


def test_a_pool_that_cannot_connect_says_the_database_is_unreachable_not_busy(
    database: LiveDatabase, tmp_path: Path
) -> None:
    parts = urlsplit(database.url)
    missing = LiveDatabase(urlunsplit((parts.scheme, parts.netloc, "/hermes_no_such_database", "", "")))
    env = {"HERMES_DB_POOL_MAX": "3", "HERMES_DB_POOL_TIMEOUT": "1"}
    with DaphneServer(database=missing, env=env, log_path=tmp_path / "daphne.log") as hermes:
        refused = httpx2.get(f"{hermes.url}/sessions", timeout=30)
        log = hermes.log()

    assert refused.status_code == 503
    error = refused.json()["error"]
    assert error["code"] == "database_unavailable"
    assert 'database "hermes_no_such_database" does not exist' in error["message"]
    assert "Traceback" not in log


def test_doctor_warns_when_the_pool_does_not_fit_in_postgresql(database: LiveDatabase) -> None:
    max_connections = int(database.query("SHOW max_connections")[0][0])
    env = {**clean_environ(), "DATABASE_URL": database.url}

    fitting = _doctor_database_row(env | {"HERMES_DB_POOL_MAX": "10"})
    too_big = _doctor_database_row(env | {"HERMES_DB_POOL_MAX": str(max_connections)})

    assert fitting["status"] == "ok"
    assert "up to 11 connections per Hermes process (HERMES_DB_POOL_MAX=10 + 1)" in fitting["detail"]
    assert too_big["status"] == "warn"
    assert "lower HERMES_DB_POOL_MAX, run fewer processes or raise PostgreSQL's max_connections" in too_big["detail"]


def _doctor_database_row(env: dict[str, str]) -> dict[str, str]:
    run = manage("doctor", "--timeout", "5", "--json", env=env, timeout=120)
    return next(row for row in json.loads(run.stdout) if row["name"] == "database")
