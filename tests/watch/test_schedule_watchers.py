"""Schedules in real `manage.py watch` processes: two watchers, one run per slot, SIGTERM clean.

Real processes on a real database (PostgreSQL when `DATABASE_URL` is one, else a SQLite file), a
real oikos_sim and the scripted model. The schedule is added by `manage.py schedule add` and dated
back three minutes, so the watchers find a slot to catch up as they start instead of the test
waiting for the next whole minute.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from oikos_sim.server import RunningSim
from tests.fakes import FakeAnthropic
from tests.fakes.anthropic_script import Reply
from tests.fakes.daphne import LiveDatabase
from tests.fakes.oikos_fixtures import AGENT_TOKEN, OPERATOR_TOKEN
from tests.fakes.subprocesses import clean_environ, manage
from tests.fakes.watchers import WatchProcess

# Cross-process: nothing to await but the database, so it is polled until this deadline.
DEADLINE_SECONDS = 120.0


@pytest.fixture
def watch_database(tmp_path: Path) -> Iterator[LiveDatabase]:
    database = LiveDatabase.create(tmp_path, name="schedules")
    yield database
    database.drop()


def _runs(database: LiveDatabase) -> list[tuple[str, str, str]]:
    return [
        (str(state), str(reason), str(verdict))
        for state, reason, verdict in database.query(
            "SELECT state, skipped_reason, verdict FROM watch_schedule_runs ORDER BY slot"
        )
    ]


def test_two_watchers_run_the_due_slot_once_and_record_the_missed_one(
    oikos: RunningSim, watch_database: LiveDatabase, fake_llm: FakeAnthropic
) -> None:
    fake_llm.responder = lambda request: Reply.text("All green.\n\nNothing needs anyone.")
    env = {
        **clean_environ(),
        **fake_llm.env(),
        "DATABASE_URL": watch_database.url,
        "OIKOS_MCP_URL": oikos.mcp_url,
        "OIKOS_MCP_TOKEN": AGENT_TOKEN,
        "OIKOS_API_URL": oikos.api_url,
        "OIKOS_API_TOKEN": OPERATOR_TOKEN,
    }
    added = manage("schedule", "add", "--cron", "* * * * *", "--question", "Anything degraded?", env=env)
    assert added.returncode == 0, added.stderr
    # Saved on the half minute two minutes back: two whole minutes passed since, the latest is due.
    now = datetime.datetime.now(datetime.UTC)
    saved = now.replace(second=30, microsecond=0) - datetime.timedelta(minutes=2)
    stamp = saved if watch_database.is_postgres else saved.strftime("%Y-%m-%d %H:%M:%S.%f")
    watch_database.query("UPDATE watch_schedules SET updated_at = %s RETURNING id", (stamp,))

    watchers = [WatchProcess(env), WatchProcess(env)]
    try:
        deadline = time.monotonic() + DEADLINE_SECONDS
        while not any(state == "done" for state, _, _ in _runs(watch_database)) and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        codes = [watcher.terminate() for watcher in watchers]

    assert codes == [0, 0]
    runs = _runs(watch_database)
    # The catch-up: the slot(s) before it missed (one, or two when the watchers started just past a
    # whole minute), then the latest one run once; a minute that passed meanwhile ran once too.
    missed = [run for run in runs if run[0] == "skipped"]
    done = runs[len(missed) :]
    assert 1 <= len(missed) <= 2 and set(missed) == {("skipped", "missed", "")}
    assert done and set(done) == {("done", "", "All green.")}
    # One model call per run: no slot was run by both watchers.
    assert len(fake_llm.requests) == len(done)
    origins = watch_database.query("SELECT actor, origin FROM agent_sessions")
    assert origins == [("agent:hermes", "schedule")] * len(done)
