"""`manage.py watch` as a real subprocess, for tests that need the watcher beside a live Hermes.

watcher = WatchProcess(env)      # returns once it says it is watching
...
watcher.terminate()              # SIGTERM, as compose stops it; its exit code
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from tests.fakes.subprocesses import REPO_ROOT


class WatchProcess:
    def __init__(self, env: dict[str, str], *, log_path: Path | None = None) -> None:
        """Start it with `env` (its logs go to `log_path`, when given)."""
        self.log_path = log_path
        log = log_path.open("w") if log_path is not None else subprocess.DEVNULL
        self.process = subprocess.Popen(
            [sys.executable, "manage.py", "watch"],
            cwd=REPO_ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
        )
        if log_path is not None:
            log.close()  # type: ignore[union-attr]
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line.startswith("watching"), line

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path is not None else ""

    def terminate(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=30)
