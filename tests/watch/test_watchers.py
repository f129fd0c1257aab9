"""Several `manage.py watch` processes on one stream: each event is claimed once, across restarts.

Real processes on a real database (PostgreSQL when `DATABASE_URL` is one, else a SQLite file),
following a real oikos_sim: the claim is the row, so counting rows proves it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from oikos_sim.pulse import signal_fire
from oikos_sim.server import RunningSim
from tests.fakes import FakeAnthropic
from tests.fakes.anthropic_script import Reply
from tests.fakes.daphne import LiveDatabase
from tests.fakes.oikos_fixtures import AGENT_TOKEN, OPERATOR_TOKEN
from tests.fakes.subprocesses import clean_environ
from tests.fakes.watchers import WatchProcess

# Cross-process: nothing to await but the database, so it is polled until this deadline.
DEADLINE_SECONDS = 60.0
TOTAL = 900


@pytest.fixture
def watch_database(tmp_path: Path) -> Iterator[LiveDatabase]:
    database = LiveDatabase.create(tmp_path, name="watchers")
    yield database
    database.drop()


def _claims(database: LiveDatabase) -> list[tuple[str, str]]:
    return [(str(a), str(b)) for a, b in database.query("SELECT event_id, claimed_by FROM watch_events")]


def _wait_for(database: LiveDatabase, count: int) -> list[tuple[str, str]]:
    deadline = time.monotonic() + DEADLINE_SECONDS
    while True:
        claims = _claims(database)
        if len(claims) >= count or time.monotonic() > deadline:
            return claims
        time.sleep(0.1)


def test_two_watchers_claim_every_event_once_across_a_restart(
    oikos: RunningSim, watch_database: LiveDatabase, tmp_path: Path
) -> None:
    policy = tmp_path / "policy.json"
    policy.write_text('{"kinds": ["none"]}')
    env = {
        **clean_environ(),
        "DATABASE_URL": watch_database.url,
        "OIKOS_MCP_URL": oikos.mcp_url,
        "OIKOS_MCP_TOKEN": AGENT_TOKEN,
        "OIKOS_API_URL": oikos.api_url,
        "OIKOS_API_TOKEN": OPERATOR_TOKEN,
        # Claims only: no event opens an investigation, so no model is needed.
        "HERMES_WATCH_POLICY_FILE": str(policy),
    }
    world, events = oikos.state.world, oikos.state.events

    def fire(count: int) -> None:
        for number in range(count):
            signal_fire(world, events, f"service:s{number % 7}", "probe", "warning", f"firing {number}")
            time.sleep(0.015)  # a steady stream, so the restart falls in the middle of it

    first, second = WatchProcess(env), WatchProcess(env)
    processes = [first, second]
    firing = threading.Thread(target=fire, args=(TOTAL,))
    try:
        # Events keep coming while the first watcher stops and starts again: a restart mid-stream.
        firing.start()
        _wait_for(watch_database, 100)
        assert first.terminate() == 0
        processes.append(restarted := WatchProcess(env))
        firing.join()
        claims = _wait_for(watch_database, TOTAL)
    finally:
        firing.join()
        for process in processes:
            if process.process.poll() is None:
                process.terminate()

    # Every event once: no gap, no duplicate (the unique id makes a second row impossible; the
    # count and the ids show none is missing).
    assert len(claims) == TOTAL
    assert sorted(int(event_id) for event_id, _ in claims) == list(range(1, TOTAL + 1))
    claimers = {claimer for _, claimer in claims}
    # Which watcher wins each race depends on the machine: the split is printed, not asserted.
    print(
        f"{TOTAL} events claimed by {len(claimers)} watcher processes: "
        + ", ".join(f"{sum(1 for _, c in claims if c == claimer)}" for claimer in sorted(claimers))
    )
    assert restarted.process.returncode == 0


def test_sigterm_interrupts_the_running_investigation_and_the_watcher_exits(
    oikos: RunningSim, watch_database: LiveDatabase, fake_llm: FakeAnthropic
) -> None:
    # The model starts answering and then says nothing more: the investigation is mid-turn.
    fake_llm.responder = lambda request: Reply.stall(after_events=3)
    env = {
        **clean_environ(),
        **fake_llm.env(),
        "DATABASE_URL": watch_database.url,
        "OIKOS_MCP_URL": oikos.mcp_url,
        "OIKOS_MCP_TOKEN": AGENT_TOKEN,
        "OIKOS_API_URL": oikos.api_url,
        "OIKOS_API_TOKEN": OPERATOR_TOKEN,
    }
    watcher = WatchProcess(env)
    try:
        signal_fire(oikos.state.world, oikos.state.events, "service:sonarr", "http_timeout", "warning", "timing out")
        deadline = time.monotonic() + DEADLINE_SECONDS
        while not fake_llm.requests and time.monotonic() < deadline:
            time.sleep(0.05)
        assert fake_llm.requests, "the investigation never asked the model"
    finally:
        code = watcher.terminate()

    assert code == 0
    ((status, error, actor),) = watch_database.query("SELECT status, error, actor FROM agent_turns")
    assert (status, actor) == ("interrupted", "agent:hermes")
    assert "watcher was stopped" in error
    ((origin,),) = watch_database.query("SELECT origin FROM agent_sessions")
    assert origin == "signal"
    # The escalation still says what happened to the turn, for whoever opens the session.
    ((escalation,),) = watch_database.query("SELECT escalation FROM watch_investigations")
    assert '"turn_status": "interrupted"' in str(escalation) or "'turn_status': 'interrupted'" in str(escalation)
