"""PostgreSQL failing under a running turn, through a proxy the test cuts and restores: a turn another
process declared interrupted stores nothing more (the history never interleaves two turns), a write
that fails ends the turn for its client with `error` and `done`, SIGTERM still stops the server, and
`/healthz` reports a database that cannot be written and recovers without a restart.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import httpx2
import psycopg
import pytest

from tests.api.conftest import SseStream, chat, hermes_env, sse_parse
from tests.fakes import FakeAnthropic, Reply
from tests.fakes.daphne import REPO_ROOT, DaphneServer, LiveDatabase
from tests.fakes.gated_mcp import Gate, build_gated_oikos
from tests.fakes.mcp_servers import MCPTestServer
from tests.fakes.subprocesses import clean_environ
from tests.fakes.tcp_proxy import TcpProxy

T = TypeVar("T")

pytestmark = pytest.mark.skipif(
    not os.environ.get("DATABASE_URL", "").startswith(("postgres://", "postgresql://")),
    reason="needs PostgreSQL (DATABASE_URL): the proxy stands between Hermes and its server",
)


def poll(check: Callable[[], T | None], *, within: float = 30.0, what: str = "") -> T:
    """Ask `check()` until it returns something; another process changes what it reads."""
    deadline = time.monotonic() + within
    while True:
        found = check()
        if found is not None and found is not False:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {within:g} s: {what}")
        time.sleep(0.1)


@pytest.fixture
def gated_oikos() -> Iterator[MCPTestServer]:
    gate = Gate.fresh()
    server = MCPTestServer(build=build_gated_oikos)
    server.start()
    yield server
    gate.release.set()
    server.stop()


@pytest.fixture
def database(tmp_path: Path) -> Iterator[LiveDatabase]:
    database = LiveDatabase.create(tmp_path, name="storage")
    yield database
    database.drop()


@pytest.fixture
def proxy(database: LiveDatabase) -> Iterator[TcpProxy]:
    parts = urlsplit(database.url)
    with TcpProxy(parts.hostname or "127.0.0.1", parts.port or 5432) as proxy:
        yield proxy


def proxied(database: LiveDatabase, proxy: TcpProxy) -> str:
    parts = urlsplit(database.url)
    netloc = parts.netloc.rsplit("@", 1)
    host = f"127.0.0.1:{proxy.port}"
    return urlunsplit((parts.scheme, f"{netloc[0]}@{host}" if len(netloc) == 2 else host, parts.path, parts.query, ""))


@pytest.fixture
def hermes(
    database: LiveDatabase, proxy: TcpProxy, fake_llm: FakeAnthropic, mcp_http_server: MCPTestServer, tmp_path: Path
) -> Iterator[DaphneServer]:
    """Hermes under Daphne, its database reached through the proxy; waits on a dead database 2 s."""
    env = hermes_env(fake_llm, mcp_http_server, DATABASE_URL=proxied(database, proxy), HERMES_DB_POOL_TIMEOUT="2")
    server = DaphneServer(database=database, env=env, log_path=tmp_path / "daphne.log")
    server.start()
    yield server
    proxy.restore()
    server.close()


def stored_history(database: LiveDatabase, session_id: str) -> list[tuple[str, str, list[dict[str, Any]]]]:
    rows = database.query(
        "SELECT turn_id, role, content FROM agent_messages WHERE session_id = %s ORDER BY id", (session_id,)
    )
    return [
        (str(turn), role, content if isinstance(content, list) else json.loads(content)) for turn, role, content in rows
    ]


def turn_status(database: LiveDatabase, turn_id: str) -> str:
    return str(database.query("SELECT status FROM agent_turns WHERE id = %s", (turn_id,))[0][0])


def well_formed(history: list[tuple[str, str, list[dict[str, Any]]]]) -> None:
    """Every tool_result answers a tool_use of the message right before it, and each of those is answered."""
    for index, (_turn, _role, content) in enumerate(history):
        results = [block["tool_use_id"] for block in content if block.get("type") == "tool_result"]
        if results:
            before = history[index - 1]
            asked = [block["id"] for block in before[2] if block.get("type") == "tool_use"]
            assert before[1] == "assistant" and results == asked, (index, history)
        asked = [block["id"] for block in content if block.get("type") == "tool_use"]
        if asked:
            after = history[index + 1] if index + 1 < len(history) else None
            assert after is not None, f"tool_use {asked} left unanswered"
            assert [block.get("tool_use_id") for block in after[2]] == asked, (index, history)


def lock_held(database: LiveDatabase, turn_id: str) -> bool:
    """Whether the process owning the turn holds its presence lock on PostgreSQL now."""
    rows = database.query(
        "SELECT 1 FROM agent_turns t JOIN agent_instances i ON i.id = t.owner JOIN pg_locks l "
        "ON l.locktype = 'advisory' AND l.granted AND ((l.classid::bigint << 32) | l.objid::bigint) = i.lock_key "
        "WHERE t.id = %s",
        (turn_id,),
    )
    return bool(rows)


def ask(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", "ask", *args, "--json"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def open_chat(url: str, body: dict[str, Any]) -> tuple[Any, SseStream, Iterator[str]]:
    client = httpx2.stream("POST", f"{url}/chat", json=body, timeout=60)
    response = client.__enter__()
    assert response.status_code == 200, response.read()
    return client, SseStream(status=200, headers=response.headers), response.iter_lines()


class TestFenced:
    def test_a_turn_declared_interrupted_by_another_process_stores_nothing_after_the_next_turn(
        self,
        database: LiveDatabase,
        proxy: TcpProxy,
        fake_llm: FakeAnthropic,
        gated_oikos: MCPTestServer,
        tmp_path: Path,
    ) -> None:
        env = hermes_env(fake_llm, gated_oikos, DATABASE_URL=proxied(database, proxy), HERMES_DB_POOL_TIMEOUT="2")
        hermes = DaphneServer(database=database, env=env, log_path=tmp_path / "daphne.log").start()
        try:
            self._fenced(hermes, proxy, database, fake_llm, gated_oikos)
        finally:
            proxy.restore()
            hermes.close()

    def _fenced(
        self,
        hermes: DaphneServer,
        proxy: TcpProxy,
        database: LiveDatabase,
        fake_llm: FakeAnthropic,
        mcp_http_server: MCPTestServer,
    ) -> None:
        fake_llm.enqueue(Reply.tool_use("mcp__oikos__held", {"label": "fenced"}))
        client, stream, lines = open_chat(hermes.url, {"message": "check the fleet slowly"})
        try:
            session_id, first = stream.headers["x-hermes-session"], stream.headers["x-hermes-turn"]
            assert Gate.current.entered.wait(60), "the tool call never started"

            # PostgreSQL loses Daphne: its presence lock goes with the connection.
            proxy.cut()
            poll(lambda: not lock_held(database, first), what="the server to release the cut lock")
            # Meanwhile an operator asks in the same session from a shell: that process takes the
            # first turn for orphaned, interrupts it, and answers.
            fake_llm.enqueue(Reply.text("Second turn: the fleet is fine."))
            env = {**clean_environ(), **hermes_env(fake_llm, mcp_http_server), "DATABASE_URL": database.url}
            second = ask("is the fleet fine?", "--session", session_id, env=env)
            assert second.returncode == 0, second.stderr
            assert json.loads(second.stdout.splitlines()[-1])["status"] == "done"

            # The database is back; the first turn's tool call ends and the model is asked again.
            proxy.restore()
            poll(
                lambda: httpx2.get(f"{hermes.url}/healthz", timeout=20).status_code == 200,
                what="the server's database connections back",
            )
            Gate.current.release.set()
            fake_llm.enqueue(Reply.text("First turn, late: the fleet was slow."))
            sse_parse(lines, stream)
        finally:
            client.__exit__(None, None, None)

        kinds = [event.event for event in stream.events]
        assert kinds[-2:] == ["error", "done"], kinds
        assert stream.events[-2].data["code"] == "interrupted"
        assert stream.events[-1].data["status"] == "interrupted"
        history = stored_history(database, session_id)
        well_formed(history)
        turns = [turn for turn, _role, _content in history]
        second_turn = next(turn for turn in turns if turn != first)
        assert first not in turns[turns.index(second_turn) :], "the first turn wrote after the second began"
        texts = [block.get("text", "") for _turn, _role, content in history for block in content]
        assert not any("First turn, late" in text for text in texts)
        assert turn_status(database, first) == "interrupted"

        # The server took its presence back, and asking again works, the history still well formed.
        fake_llm.enqueue(Reply.text("Third turn."))
        again = chat(hermes.url, {"message": "and now?", "session_id": session_id})
        assert again.status == 200 and again.events[-1].data["status"] == "done", again.events
        assert poll(lambda: lock_held(database, again.headers["x-hermes-turn"]), what="the lock taken again")
        well_formed(stored_history(database, session_id))


class TestWriteFails:
    def test_the_client_hears_error_and_done_the_turn_ends_and_sigterm_stops_the_server(
        self, hermes: DaphneServer, proxy: TcpProxy, database: LiveDatabase, fake_llm: FakeAnthropic
    ) -> None:
        fake_llm.enqueue(Reply.text("The fleet is counted: " + "node " * 400, chunk=40, delay=0.02))
        client, stream, lines = open_chat(hermes.url, {"message": "count the fleet"})
        try:
            turn_id = stream.headers["x-hermes-turn"]
            sse_parse(lines, stream, stop=lambda event: event.event == "text")
            proxy.cut()
            sse_parse(lines, stream)
        finally:
            client.__exit__(None, None, None)

        kinds = [event.event for event in stream.events]
        assert kinds[-2:] == ["error", "done"], kinds
        assert stream.events[-2].data["code"] == "storage_error"
        assert stream.events[-1].data["status"] == "error"
        # Back within the end write's retries: the turn is stored as it ended, not left running.
        proxy.restore()
        assert poll(lambda: turn_status(database, turn_id) == "error", what="the turn's end stored")

        # A turn running when the database goes again, then SIGTERM: the server still exits.
        fake_llm.enqueue(Reply.text("Counting again: " + "node " * 2000, chunk=20, delay=0.02))
        client, stream, lines = open_chat(hermes.url, {"message": "count it again"})
        try:
            sse_parse(lines, stream, stop=lambda event: event.event == "text")
            proxy.cut()
            hermes.signal(signal.SIGTERM)
            sse_parse(lines, stream)
        finally:
            client.__exit__(None, None, None)
        hermes.wait_exit(timeout=20)
        assert [event.event for event in stream.events][-1] == "done"


class TestHealth:
    def test_a_database_that_cannot_be_written_is_reported_and_recovery_needs_no_restart(
        self, hermes: DaphneServer, database: LiveDatabase
    ) -> None:
        assert httpx2.get(f"{hermes.url}/healthz", timeout=20).status_code == 200
        name = urlsplit(database.url).path.lstrip("/")

        def sessions_reset(read_only: bool) -> None:
            admin = urlunsplit(urlsplit(database.url)._replace(path="/postgres"))
            with psycopg.connect(admin, autocommit=True) as connection:
                setting = (
                    "SET default_transaction_read_only = on" if read_only else "RESET default_transaction_read_only"
                )
                connection.execute(f'ALTER DATABASE "{name}" {setting}')
                # Sessions take the setting when they start: end the server's, as a failover would.
                connection.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,))

        def unwritable() -> bool:
            response = httpx2.get(f"{hermes.url}/healthz", timeout=20)
            # Right after the sessions end the pool may briefly have no connection: not this 503.
            return response.status_code == 503 and "cannot be written" in (response.json()["database"]["error"] or "")

        sessions_reset(True)
        try:
            poll(unwritable, what="/healthz to report the read-only database")
        finally:
            sessions_reset(False)
        poll(lambda: httpx2.get(f"{hermes.url}/healthz", timeout=20).status_code == 200, what="/healthz to recover")
