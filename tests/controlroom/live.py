"""Hermes served by a real Daphne subprocess on 127.0.0.1 (an ephemeral port), for browser tests.

Daphne binds port 0 and logs the port it got; `start()` reads that line and returns once the
server answers. Its log is kept (`log_tail()`) so a failing test can show what the server said.
"""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time
from collections import deque

import httpx2

from tests.fakes.subprocesses import REPO_ROOT

LISTENING = re.compile(r"Listening on TCP address 127\.0\.0\.1:(\d+)")
START_TIMEOUT = 30.0


class LiveHermes:
    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.url = ""
        self._process: subprocess.Popen[str] | None = None
        self._log: deque[str] = deque(maxlen=400)
        self._reader: threading.Thread | None = None

    def start(self) -> str:
        process = subprocess.Popen(
            [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", "0", "hermes_site.asgi:application"],
            cwd=REPO_ROOT,
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self._process = process
        assert process.stderr is not None
        deadline = time.monotonic() + START_TIMEOUT
        port = None
        while port is None:
            line = process.stderr.readline()
            if not line:
                self.stop()
                raise RuntimeError("Daphne exited before listening:\n" + self.log_tail())
            self._log.append(line.rstrip())
            match = LISTENING.search(line)
            port = match.group(1) if match else None
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("Daphne did not start listening in time:\n" + self.log_tail())
        self._reader = threading.Thread(target=self._drain, name="daphne-log", daemon=True)
        self._reader.start()
        self.url = f"http://127.0.0.1:{port}"
        httpx2.get(f"{self.url}/ui/sessions/nav/", timeout=10).raise_for_status()
        return self.url

    def _drain(self) -> None:
        assert self._process is not None and self._process.stderr is not None
        for line in self._process.stderr:
            self._log.append(line.rstrip())

    def log_tail(self, lines: int = 60) -> str:
        return "\n".join(list(self._log)[-lines:])

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=5)
        if self._reader is not None:
            self._reader.join(timeout=5)
