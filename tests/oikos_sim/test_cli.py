"""``python -m oikos_sim`` as a parent process runs it: read the first line, connect, stop it."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx2

from oikos_sim.server import RunningSim
from tests.oikos_sim.clients import AGENT_TOKEN, OPERATOR_TOKEN, mcp_session, tool_call

REPO = Path(__file__).resolve().parents[2]
LISTENING = re.compile(r"^oikos_sim listening on (http://127\.0\.0\.1:(\d+))$")


@asynccontextmanager
async def oikos_sim_process(*args: str, env: dict[str, str] | None = None) -> AsyncIterator[asyncio.subprocess.Process]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "oikos_sim", *args,
        cwd=REPO,
        env={**os.environ, **(env or {})},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        yield process
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def test_starts_on_a_free_port_answers_and_stops_on_sigterm() -> None:
    async with oikos_sim_process("--port", "0", "--execution-seconds", "0.2") as process:
        assert process.stdout is not None
        assert process.stderr is not None
        line = (await asyncio.wait_for(process.stdout.readline(), 20)).decode().strip()
        match = LISTENING.match(line)
        assert match, line
        url = match.group(1)
        assert int(match.group(2)) > 0

        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {OPERATOR_TOKEN}"}) as http:
            health = (await http.get(f"{url}/api/v1/health")).json()
        assert health["degraded"][0]["slug"] == "service:postgres"
        async with mcp_session(f"{url}/mcp") as client:
            assert (await tool_call(client, "whoami"))["actor"] == "agent:hermes"

        process.send_signal(signal.SIGTERM)
        # uvicorn shuts down gracefully, then re-raises the signal so the exit status says why.
        assert await asyncio.wait_for(process.wait(), 15) == -signal.SIGTERM
        output = (await process.stdout.read() + await process.stderr.read()).decode()
    assert AGENT_TOKEN not in output
    assert OPERATOR_TOKEN not in output
    assert "agent:hermes" in output  # the actor names are announced, the tokens never


async def test_a_bad_token_setting_stops_it_with_a_message() -> None:
    async with oikos_sim_process("--port", "0", env={"OIKOS_SIM_TOKENS": "hermes=s3cret-value"}) as process:
        _, stderr = await asyncio.wait_for(process.communicate(), 20)
    assert process.returncode == 2
    assert "must be kind:name" in stderr.decode()
    assert "s3cret-value" not in stderr.decode()


async def test_a_taken_port_is_reported(shared_sim: RunningSim) -> None:
    port = shared_sim.url.rsplit(":", 1)[1]
    async with oikos_sim_process("--port", port) as process:
        _, stderr = await asyncio.wait_for(process.communicate(), 20)
    assert process.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port}" in stderr.decode()
