"""`make run`'s launcher: oikos_sim and Hermes come up together, and go down together; nothing spends
tokens unasked (the incident pulse is `--demo`'s), and `ask` in another terminal reaches the same Oikos."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx2

from hermes_site.dev import SIM_OPERATOR_TOKEN
from tests.fakes import FakeAnthropic
from tests.fakes.scripted_models import DegradedInvestigator
from tests.fakes.subprocesses import REPO_ROOT, clean_environ, manage

# Generous: the launcher migrates a fresh database before Daphne starts, on a busy machine.
START_SECONDS = 120


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Launched:
    def __init__(self, process: subprocess.Popen[str], banner: str, port: int, oikos_port: int) -> None:
        self.process, self.banner, self.port, self.oikos_port = process, banner, port, oikos_port

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def control_room(self) -> httpx2.Response:
        deadline = time.monotonic() + START_SECONDS
        while True:
            try:
                return httpx2.get(f"{self.url}/ui/", timeout=5)
            except httpx2.TransportError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)


@contextmanager
def launched(env: dict[str, str], *args: str) -> Iterator[Launched]:
    """`python -m hermes_site.dev` until its banner is printed; stopped with SIGTERM afterwards."""
    port, oikos_port = _free_port(), _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "hermes_site.dev", "--port", str(port), "--oikos-port", str(oikos_port), *args],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert process.stdout is not None
        lines: list[str] = []
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            line = process.stdout.readline()
            lines.append(line)
            if "Ctrl-C stops them all." in line or not line:
                break
        banner = "".join(lines)
        assert "Ctrl-C stops them all." in banner, banner
        yield Launched(process, banner, port, oikos_port)
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
    for probe_port in (port, oikos_port):
        with socket.socket() as probe:
            assert probe.connect_ex(("127.0.0.1", probe_port)) != 0, f"something still listens on {probe_port}"


def oikos_events(oikos_port: int, *, until: str | None = None, quiet_seconds: float = 1.0) -> list[str]:
    """The `event:` names of oikos_sim's event stream, from its first event: until one named `until`
    arrives, or (without `until`) until the stream goes quiet after its backlog."""
    names: list[str] = []
    timeout = httpx2.Timeout(10.0, read=30.0 if until else quiet_seconds)
    try:
        with httpx2.stream(
            "GET",
            f"http://127.0.0.1:{oikos_port}/api/v1/events",
            headers={"Authorization": f"Bearer {SIM_OPERATOR_TOKEN}", "Last-Event-ID": "0"},
            timeout=timeout,
        ) as stream:
            assert stream.status_code == 200
            for line in stream.iter_lines():
                if line.startswith("event: "):
                    names.append(line.removeprefix("event: "))
                    if names[-1] == until:
                        break
    except httpx2.ReadTimeout:
        if until:
            raise
    return names


def test_the_launcher_serves_the_control_room_beside_oikos_sim_and_ask_reaches_it_from_elsewhere(
    tmp_path: Path, fake_llm: FakeAnthropic
) -> None:
    dotenv = tmp_path / ".env"
    env = {**clean_environ(), **fake_llm.env(), "HERMES_DATA_DIR": str(tmp_path), "HERMES_DOTENV": str(dotenv)}

    # The demo's period is given, but without --demo the pulse stays off.
    with launched(env, "--demo-interval", "0.2") as hermes:
        # The banner says what spends tokens, and what does not.
        assert "incident pulse off" in hermes.banner
        assert "your questions" in hermes.banner and "none unasked" in hermes.banner
        assert "daily cap: 1,000,000 tokens (the dev default" in hermes.banner
        assert str(dotenv) in hermes.banner

        page = hermes.control_room()
        assert page.status_code == 200 and "Hermes" in page.text
        # Hermes reaches oikos_sim's MCP endpoint with the agent's token: the degraded postgres shows.
        answer = httpx2.post(f"{hermes.url}/query", json={"tool": "get_health_summary", "args": {}}, timeout=30)
        assert answer.status_code == 200, answer.text
        assert "service:postgres" in answer.text
        assert (tmp_path / "hermes.sqlite3").exists()

        # `ask` in a terminal of its own: nothing of the launcher's environment, only the file.
        fake_llm.responder = DegradedInvestigator()
        asked = manage(
            "ask",
            "what's degraded?",
            env={**clean_environ(), **fake_llm.env(), "HERMES_DATA_DIR": str(tmp_path), "HERMES_DOTENV": str(dotenv)},
            timeout=120,
        )
        assert asked.returncode == 0, asked.stderr
        assert "[tool] oikos.get_health_summary {} -> ok" in asked.stderr
        # It ran under the dev budget too.
        assert "HERMES_DAILY_TOKEN_BUDGET=1000000" in dotenv.read_text()

        # No incident was raised while all of that ran: oikos_sim's stream has no signal.
        assert "signal.fired" not in oikos_events(hermes.oikos_port)
    # Stopped cleanly, the launcher takes its file with it: a later `ask` gets a reason, not a dead URL.
    assert not dotenv.exists()


def test_demo_mode_raises_simulated_incidents(tmp_path: Path) -> None:
    env = {**clean_environ(), "HERMES_DATA_DIR": str(tmp_path), "HERMES_DOTENV": str(tmp_path / ".env")}

    with launched(env, "--demo", "--demo-interval", "0.2") as hermes:
        assert "incident pulse every 0.2 s" in hermes.banner
        # Without a model, nothing is investigated, and the banner says so.
        assert "No model configured" in hermes.banner and "nothing spends tokens" in hermes.banner

        assert oikos_events(hermes.oikos_port, until="signal.fired")[-1] == "signal.fired"


def test_a_file_left_by_a_launcher_that_died_is_not_used(
    tmp_path: Path, fake_llm: FakeAnthropic, fresh_database: str
) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    dotenv = tmp_path / ".env"
    dotenv.write_text(f"HERMES_DEV_PID={dead.pid}\nOIKOS_MCP_URL=http://127.0.0.1:9/mcp\nOIKOS_MCP_TOKEN=x\n")

    asked = manage(
        "ask",
        "what's degraded?",
        env={**clean_environ(), **fake_llm.env(), "HERMES_DOTENV": str(dotenv), "DATABASE_URL": fresh_database},
        timeout=120,
    )

    assert asked.returncode == 2
    assert "no MCP server is configured" in asked.stderr and "no longer running" in asked.stderr
    assert fake_llm.requests == []
