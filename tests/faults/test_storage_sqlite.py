"""SQLite's disk filling up under a running turn (a tmpfs the test fills): the client gets `error`
and `done`, SIGTERM still stops the server, and once there is room the turn is not left `running`.

Needs to mount a small tmpfs (root, or CAP_SYS_ADMIN); skipped where it cannot.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.api.conftest import hermes_env, sse_parse
from tests.fakes import FakeAnthropic, Reply
from tests.fakes.daphne import DaphneServer, LiveDatabase
from tests.fakes.mcp_servers import MCPTestServer
from tests.faults.test_storage import open_chat, poll


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 24 MB file system of its own, unmounted after the test."""
    mount = tmp_path / "disk"
    mount.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(mount)], capture_output=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.decode().strip()}")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def disk_fill(directory: Path) -> Path:
    """Fill the file system holding `directory` to the last byte; returns the filler file."""
    filler = directory / "filler"
    descriptor = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for size in (1 << 20, 4096, 1):
            with contextlib.suppress(OSError):
                while os.write(descriptor, b"\0" * size):
                    pass
    finally:
        os.close(descriptor)
    return filler


def test_a_full_disk_mid_turn_ends_it_for_the_client_and_sigterm_still_stops_the_server(
    small_disk: Path, migrated_template: Path, fake_llm: FakeAnthropic, mcp_http_server: MCPTestServer, tmp_path: Path
) -> None:
    path = small_disk / "hermes.sqlite3"
    shutil.copyfile(migrated_template, path)
    database = LiveDatabase(f"sqlite:///{path}")
    hermes = DaphneServer(database=database, env=hermes_env(fake_llm, mcp_http_server), log_path=tmp_path / "d.log")
    hermes.start()
    try:
        # An answer too large for what is left of the disk once it is full.
        fake_llm.enqueue(Reply.text("The fleet: " + "node ok; " * 250_000, chunk=100_000, delay=0.1))
        client, stream, lines = open_chat(hermes.url, {"message": "list the fleet"})
        try:
            turn_id = stream.headers["x-hermes-turn"]
            sse_parse(lines, stream, stop=lambda event: event.event == "text")
            filler = disk_fill(small_disk)
            sse_parse(lines, stream)
        finally:
            client.__exit__(None, None, None)

        kinds = [event.event for event in stream.events]
        assert kinds[-2:] == ["error", "done"], kinds
        assert stream.events[-2].data["code"] == "storage_error"
        assert stream.events[-1].data["status"] == "error"

        # The disk still full, the turn's end not stored: SIGTERM stops the server all the same.
        hermes.signal(signal.SIGTERM)
        hermes.wait_exit(timeout=20)
    finally:
        hermes.close()

    filler.unlink()
    hermes = DaphneServer(database=database, env=hermes_env(fake_llm, mcp_http_server), log_path=tmp_path / "d2.log")
    hermes.start()
    try:
        status = poll(
            lambda: (
                (rows := database.query("SELECT status FROM agent_turns WHERE id = %s", (database.uuid(turn_id),)))
                and rows[0][0] != "running"
                and rows[0][0]
            ),
            what="the turn no longer running",
        )
        assert status in ("error", "interrupted")
    finally:
        hermes.close()
