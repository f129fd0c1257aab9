"""`manage.py matrix_bridge` as the process an operator runs: a clear refusal without settings, and
SIGTERM mid-answer ending the turn with what it said so far (real Synapse, real processes)."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from oikos_sim.server import RunningSim
from tests.fakes import FakeAnthropic
from tests.fakes.anthropic_script import Reply
from tests.fakes.daphne import LiveDatabase
from tests.fakes.oikos_fixtures import AGENT_TOKEN, OPERATOR_TOKEN
from tests.fakes.subprocesses import REPO_ROOT, clean_environ, manage
from tests.matrix.conftest import Room


@pytest.fixture
def bridge_database(tmp_path: Path) -> Iterator[LiveDatabase]:
    database = LiveDatabase.create(tmp_path, name="matrix")
    yield database
    database.drop()


async def _synced(database: LiveDatabase) -> None:
    deadline = time.monotonic() + 60
    while not await asyncio.to_thread(database.query, "SELECT next_batch FROM matrix_sync"):
        assert time.monotonic() < deadline, "the bridge never finished its first sync"
        await asyncio.sleep(0.2)


def test_without_settings_it_names_what_to_set() -> None:
    run = manage("matrix_bridge", env=clean_environ(), timeout=120)
    assert run.returncode != 0
    assert "HERMES_MATRIX_HOMESERVER" in run.stderr and "HERMES_MATRIX_ACCESS_TOKEN" in run.stderr


async def test_sigterm_mid_answer_ends_the_turn_and_its_message_says_so(
    room: Room, fake_llm: FakeAnthropic, oikos: RunningSim, bridge_database: LiveDatabase
) -> None:
    fake_llm.responder = lambda request: Reply.text("Checking every service, one by one. " * 40, chunk=4, delay=0.05)
    env = {
        **clean_environ(),
        **fake_llm.env(),
        "DATABASE_URL": bridge_database.url,
        "OIKOS_MCP_URL": oikos.mcp_url,
        "OIKOS_MCP_TOKEN": AGENT_TOKEN,
        "OIKOS_API_URL": oikos.api_url,
        "OIKOS_API_TOKEN": OPERATOR_TOKEN,
        "HERMES_MATRIX_HOMESERVER": room.homeserver.url,
        "HERMES_MATRIX_USER_ID": room.bot.user_id,
        "HERMES_MATRIX_ACCESS_TOKEN": room.bot.access_token,
        "HERMES_MATRIX_ROOMS": room.room_id,
        "HERMES_MATRIX_OPERATORS": f"{room.alice.user.user_id}=alice",
        "HERMES_MATRIX_EDIT_SECONDS": "0.2",
    }
    process = await asyncio.to_thread(
        subprocess.Popen,
        [sys.executable, "manage.py", "matrix_bridge"],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = await asyncio.to_thread(process.stdout.readline)
        assert line.startswith(f"serving Matrix as {room.bot.user_id}"), line
        # Asked only once the first sync stored its position: what came before it is history.
        await _synced(bridge_database)
        question = await room.alice.send(room.room_id, f"{room.bot.user_id} how is every service?")
        await room.wait_for(lambda ms: any(m.thread == question and "Checking" in m.body for m in ms), "streaming")

        process.send_signal(signal.SIGTERM)
        code = await asyncio.to_thread(process.wait, 60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()

    assert code == 0
    messages = await room.wait_for(
        lambda ms: any("formatted_body" in m.content for m in ms), "the final edit of the interrupted answer"
    )
    await room.show("interrupted thread")
    (answer,) = [m for m in messages if "formatted_body" in m.content]  # after the progress message
    assert answer.body.startswith("Checking every service")
    assert "stopped (SIGTERM) while answering" in answer.body
