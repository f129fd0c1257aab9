"""`docker/start.sh`, the image's entrypoint, run outside Docker: migrate, then Daphne serves."""

from __future__ import annotations

import queue
import re
import signal
import sqlite3
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from tests.fakes.subprocesses import REPO_ROOT, clean_environ

START_SCRIPT = REPO_ROOT / "docker" / "start.sh"
LISTENING = re.compile(r"Listening on TCP address 127\.0\.0\.1:(\d+)")


class Started:
    """The script's process and the lines it logged so far."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self._queue.put(line)
        self._queue.put(None)

    def wait_for(self, pattern: re.Pattern[str], timeout: float = 60.0) -> re.Match[str]:
        while True:
            try:
                line = self._queue.get(timeout=timeout)
            except queue.Empty:
                raise AssertionError(
                    f"no line matching {pattern.pattern!r} in {timeout} s:\n{''.join(self.lines)}"
                ) from None
            if line is None:
                raise AssertionError(
                    f"the process ended ({self.process.wait()}) before {pattern.pattern!r}:\n{''.join(self.lines)}"
                )
            self.lines.append(line)
            if match := pattern.search(line):
                return match


@pytest.fixture
def started(tmp_path: Path) -> Iterator[tuple[Started, Path]]:
    database = tmp_path / "fresh.sqlite3"
    env = clean_environ()
    env.update(DATABASE_URL=f"sqlite:///{database}", HERMES_BIND="127.0.0.1", HERMES_PORT="0")
    env.pop("REDIS_URL", None)
    process = subprocess.Popen(
        [str(START_SCRIPT)],
        cwd=tmp_path,  # the script finds the project from its own location
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        yield Started(process), database
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)


def test_migrates_a_fresh_database_then_serves_until_sigterm(started: tuple[Started, Path]) -> None:
    script, database = started

    port = int(script.wait_for(LISTENING).group(1))

    log = "".join(script.lines)
    assert "hermes: applying database migrations" in log
    with sqlite3.connect(database) as db:
        applied = {app for (app,) in db.execute("SELECT DISTINCT app FROM django_migrations")}
    assert "agent" in applied
    # What the image's HEALTHCHECK asks: 200 once the database works (the rest may be degraded).
    health = httpx2.get(f"http://127.0.0.1:{port}/healthz", timeout=10)
    assert health.status_code == 200
    assert health.json()["database"]["ok"] is True
    metrics = httpx2.get(f"http://127.0.0.1:{port}/metrics", timeout=10)
    assert metrics.status_code == 200 and "hermes_turns_running" in metrics.text

    # `exec`: Daphne itself is the script's process, so the container's SIGTERM reaches it.
    script.process.send_signal(signal.SIGTERM)
    assert script.process.wait(timeout=20) == 0
