"""Hermes served by a real Daphne process, for tests that need the whole server (HTTP API, browser).

    db = LiveDatabase.create(tmp_dir)             # or the session-scoped `live_database` fixture
    with DaphneServer(database=db, env={**fake_llm.env(), "OIKOS_MCP_URL": ...}) as hermes:
        httpx2.get(f"{hermes.url}/healthz")
        hermes.restart()                           # same URL: the listening socket stays open
        db.counts()                                # rows in Hermes's tables, read from outside

or, inside a test, the `daphne_server` fixture: `hermes = daphne_server(env={...})`.

How it works, and why:
- The database is a separate one the subprocess can see: pytest-django's test database lives in a
  transaction (SQLite) or under a name only the test process knows. `LiveDatabase.create()` makes a
  migrated SQLite file, or — when `DATABASE_URL` points at PostgreSQL (CI) — a PostgreSQL database
  named after it with a `_live` suffix (created afresh, dropped by `drop()`).
- The port: the test process binds and listens on 127.0.0.1:0 and hands the socket to Daphne
  (`daphne --fd N`), so the URL is known before Daphne starts, no other process can take the port,
  and a restart serves the same URL. Connections made while Daphne is starting (or restarting) wait
  in the socket's backlog instead of being refused.
- Ready means `GET /healthz` answered (any status: a server whose database is down still serves).
- The environment is `tests.fakes.subprocesses.clean_environ()` (the test process's minus every
  `ANTHROPIC_*`, `HERMES_*`, `OIKOS_*` and `DATABASE_URL`) plus `env`; so nothing from the
  developer's shell leaks in. `REDIS_URL` is kept, so CI runs the server on the Redis channel layer.
- Daphne's output (access log included) goes to a file; `log()` returns it, and a failed start
  raises with it.
- `stop()` sends SIGTERM and waits (then SIGKILL), `kill()` sends SIGKILL; the fixture stops every
  server it started.
"""

from __future__ import annotations

import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx2

from tests.fakes.subprocesses import REPO_ROOT, clean_environ, database_migrate

HERMES_TABLES = ("agent_sessions", "agent_turns", "agent_messages", "agent_activity", "agent_search_entries")


class LiveDatabase:
    """A migrated database for server subprocesses, readable from the test process."""

    def __init__(self, url: str) -> None:
        self.url = url

    @classmethod
    def create(cls, directory: Path, *, name: str = "live") -> LiveDatabase:
        """A migrated SQLite file in `directory`, or a PostgreSQL database when `DATABASE_URL` is one."""
        base = os.environ.get("DATABASE_URL", "")
        if base.startswith(("postgres://", "postgresql://")):
            parts = urlsplit(base)
            database_name = f"{parts.path.lstrip('/') or 'hermes'}_{name}"
            url = urlunsplit((parts.scheme, parts.netloc, f"/{database_name}", parts.query, ""))
            with _postgres_admin(base) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{database_name}" WITH (FORCE)')
                admin.execute(f'CREATE DATABASE "{database_name}"')
        else:
            url = f"sqlite:///{directory / f'hermes-{name}.sqlite3'}"
        return cls(database_migrate(url))

    @property
    def is_postgres(self) -> bool:
        return self.url.startswith(("postgres://", "postgresql://"))

    def query(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """Run one read-only statement (`%s` placeholders) on a fresh connection; all rows."""
        if self.is_postgres:
            import psycopg

            with psycopg.connect(self.url, autocommit=True) as connection:
                return list(connection.execute(sql, params).fetchall())
        path = self.url.removeprefix("sqlite:///")
        with sqlite3.connect(path, timeout=20) as connection:
            return list(connection.execute(sql.replace("%s", "?"), params).fetchall())

    def uuid(self, value: str) -> str:
        """A UUID as a query parameter: Django stores 32 hex digits in SQLite, a native uuid in PostgreSQL."""
        return value if self.is_postgres else value.replace("-", "")

    def counts(self) -> dict[str, int]:
        """Rows in each of Hermes's tables: compare before and after to prove nothing was written."""
        return {table: self.query(f"SELECT COUNT(*) FROM {table}")[0][0] for table in HERMES_TABLES}

    def drop(self) -> None:
        """Remove the PostgreSQL database (a SQLite file goes with its temporary directory)."""
        if self.is_postgres:
            name = urlsplit(self.url).path.lstrip("/")
            with _postgres_admin(self.url) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


class DaphneServer:
    """`daphne hermes_site.asgi:application` on 127.0.0.1, in a subprocess, on a port of its own."""

    def __init__(
        self,
        *,
        database: LiveDatabase,
        env: Mapping[str, str] | None = None,
        log_path: Path | None = None,
        startup_timeout: float = 60.0,
    ) -> None:
        self.database = database
        self.env = dict(env or {})
        self.startup_timeout = startup_timeout
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(128)
        host, port = self._listener.getsockname()
        self.url = f"http://{host}:{port}"
        self.log_path = log_path or Path(f"/tmp/hermes-daphne-{os.getpid()}-{port}.log")
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self) -> DaphneServer:
        """Start Daphne and return once `/healthz` answers; raises with Daphne's output if it cannot."""
        if self.running:
            raise RuntimeError("this Daphne server is already running")
        if self._listener.fileno() < 0:
            raise RuntimeError("this Daphne server was closed; build a new one")
        fd = self._listener.fileno()
        environment = {
            **clean_environ(),
            "DATABASE_URL": self.database.url,
            "DJANGO_SETTINGS_MODULE": "hermes_site.settings",
            "PYTHONUNBUFFERED": "1",
            **self.env,
        }
        with self.log_path.open("ab") as log:
            self._process = subprocess.Popen(
                [sys.executable, "-m", "hermes_site.serve", "--fd", str(fd), "-v", "1", "hermes_site.asgi:application"],
                cwd=REPO_ROOT,
                env=environment,
                stdout=log,
                stderr=subprocess.STDOUT,
                pass_fds=(fd,),
            )
        self._wait_ready()
        return self

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 10 s. The port stays reserved for `start()` again."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)

    @property
    def pid(self) -> int:
        if self._process is None:
            raise RuntimeError("this Daphne server is not running")
        return self._process.pid

    def signal(self, number: int) -> None:
        """Send a signal (SIGTERM: a graceful stop) without waiting; `wait_exit()` then reaps it."""
        if self._process is not None:
            self._process.send_signal(number)

    def wait_exit(self, timeout: float = 15) -> int:
        """Wait for the process to end (after `signal`); returns its status."""
        process, self._process = self._process, None
        if process is None:
            return 0
        return process.wait(timeout=timeout)

    def kill(self) -> None:
        """SIGKILL, as a crash or the OOM killer would: nothing of Hermes runs after it."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.kill()
            process.wait(timeout=10)

    def restart(self) -> None:
        self.stop()
        self.start()

    def close(self) -> None:
        """Stop the server and release its port."""
        self.stop()
        self._listener.close()

    def log(self) -> str:
        """Everything Daphne printed so far (startup messages, access log, tracebacks)."""
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return ""

    def __enter__(self) -> DaphneServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def _wait_ready(self) -> None:
        assert self._process is not None
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"Daphne exited with status {self._process.returncode}:\n{self.log()}")
            try:
                # The socket already listens, so this waits in the backlog until Daphne accepts it;
                # the first request also waits for Django to load the URLs and the API's imports.
                httpx2.get(f"{self.url}/healthz", timeout=httpx2.Timeout(10.0, connect=2.0))
            except httpx2.TransportError:
                continue
            return
        self.stop()
        raise RuntimeError(f"Daphne did not answer /healthz within {self.startup_timeout:g} s:\n{self.log()}")


def _postgres_admin(url: str) -> Any:
    """An autocommit connection to the server's `postgres` database (CREATE/DROP DATABASE)."""
    import psycopg

    parts = urlsplit(url)
    return psycopg.connect(urlunsplit((parts.scheme, parts.netloc, "/postgres", parts.query, "")), autocommit=True)
