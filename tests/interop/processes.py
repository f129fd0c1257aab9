"""Hermes processes for interop tests: Daphne serving Hermes, pairing tokens, rows of its database.

`DaphneHermes` runs `daphne -b 127.0.0.1 -p 0 hermes_site.asgi:application` and learns its port
from Daphne's "Listening on" log line (read by a thread that keeps draining the output, so the pipe
never fills). Every process is given an explicit environment (`tests.fakes.subprocesses.clean_environ` plus
what the test sets).
"""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Mapping
from types import TracebackType

from tests.fakes.subprocesses import REPO_ROOT, manage

_LISTENING = re.compile(r"Listening on TCP address 127\.0\.0\.1:(\d+)")
START_TIMEOUT = 60.0


def database_rows(url: str, query: str, *params: object) -> list[tuple]:
    """Rows of a query against a Hermes process's SQLite file, read from the test process."""
    with sqlite3.connect(url.removeprefix("sqlite:///")) as connection:
        return list(connection.execute(query, params))


class DaphneHermes:
    """Hermes served by Daphne on a loopback port the kernel picks."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = dict(env)
        self.url = ""
        self.output: list[str] = []
        self._process: subprocess.Popen[str] | None = None
        self._listening = threading.Event()
        self._reader: threading.Thread | None = None

    def start(self) -> DaphneHermes:
        self._process = subprocess.Popen(
            [sys.executable, "-u", "-m", "daphne", "-b", "127.0.0.1", "-p", "0", "hermes_site.asgi:application"],
            cwd=REPO_ROOT,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self._reader = threading.Thread(target=self._read, name="daphne-output", daemon=True)
        self._reader.start()
        if not self._listening.wait(START_TIMEOUT) or not self.url:
            self.stop()
            raise RuntimeError("Daphne did not start:\n" + "".join(self.output[-40:]))
        return self

    def _read(self) -> None:
        assert self._process is not None and self._process.stdout is not None
        for line in self._process.stdout:
            self.output.append(line)
            match = _LISTENING.search(line)
            if match and not self.url:
                self.url = f"http://127.0.0.1:{match.group(1)}"
                self._listening.set()
        self._listening.set()  # the process ended: stop waiting either way

    def stop(self) -> None:
        if self._process is None:
            return
        self._process.terminate()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait(timeout=10)
        if self._reader is not None:
            self._reader.join(timeout=5)
        self._process = None

    def __enter__(self) -> DaphneHermes:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.stop()


def pairing_tokens(*peers: str, env: Mapping[str, str]) -> dict[str, str]:
    """Tokens for several peers, issued in one process (what `a2a_pair` does, without one process each)."""
    code = (
        "import json; from interop.services import pairing_token_issue; "
        f"print(json.dumps({{peer: pairing_token_issue(peer=peer) for peer in {list(peers)!r}}}))"
    )
    run = manage("shell", "-c", code, env=env)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout.strip().splitlines()[-1])
