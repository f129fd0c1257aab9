"""A real Synapse homeserver on loopback for the Matrix bridge tests.

Synapse runs from `.synapse-venv` (built by `tests/matrix/synapse-venv.sh`, which `.ci/run` calls):
its pins are not Hermes's, so it never shares our environment. One homeserver serves every Matrix
test of a run (it takes seconds to start); each test registers users of its own through the
shared-secret admin API, so tests never see each other's rooms or messages.

Rate limits are set high for the whole server so tests are not throttled by accident; a test that
wants `M_LIMIT_EXCEEDED` lowers one user's limit with the admin API (`ratelimit_override`, whole
messages per second only), or starts a homeserver of its own with `stock_rate_limits=True`: Synapse's
own defaults for everything a room does (0.2 messages per second after a burst of 10), as a
homeserver an operator installs has them.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import httpx2

ROOT = Path(__file__).resolve().parents[2]
VENV = ROOT / ".synapse-venv"
INSTALLER = ROOT / "tests" / "matrix" / "synapse-venv.sh"
SERVER_NAME = "hermes.test"
START_SECONDS = 120.0


@dataclass(frozen=True)
class MatrixUser:
    user_id: str
    access_token: str
    password: str


def synapse_python() -> Path:
    """The Synapse venv's interpreter, built on demand (a missing venv is built, never skipped)."""
    python = VENV / "bin" / "python"
    marker = VENV / "hermes-synapse-version"
    if not (python.exists() and marker.exists()):
        subprocess.run(["bash", str(INSTALLER)], check=True)
    return python


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _config(directory: Path, port: int, shared_secret: str, *, stock_rate_limits: bool) -> str:
    # Every rate limit the client API has, set out of reach; bcrypt at its cheapest (tests register many users).
    lenient = "{per_second: 1000, burst_count: 1000}"
    # Stock: Synapse's defaults stand, except registration (each test registers its own users).
    limits = (
        f"rc_registration: {lenient}\n"
        if stock_rate_limits
        else f"""rc_message: {lenient}
rc_registration: {lenient}
rc_joins: {{local: {lenient}, remote: {lenient}}}
rc_invites: {{per_room: {lenient}, per_user: {lenient}, per_issuer: {lenient}}}
rc_login: {{address: {lenient}, account: {lenient}, failed_attempts: {lenient}}}
rc_admin_redaction: {lenient}
rc_room_creation: {lenient}
"""
    )
    return f"""
server_name: "{SERVER_NAME}"
pid_file: "{directory}/homeserver.pid"
listeners:
  - port: {port}
    bind_addresses: ["127.0.0.1"]
    type: http
    tls: false
    x_forwarded: false
    resources:
      - names: [client]
        compress: false
database:
  name: sqlite3
  args:
    database: "{directory}/homeserver.db"
media_store_path: "{directory}/media"
signing_key_path: "{directory}/signing.key"
registration_shared_secret: "{shared_secret}"
macaroon_secret_key: "{secrets.token_hex(16)}"
form_secret: "{secrets.token_hex(16)}"
report_stats: false
enable_registration: false
trusted_key_servers: []
suppress_key_server_warning: true
federation_domain_whitelist: []
bcrypt_rounds: 4
presence:
  enabled: false
url_preview_enabled: false
{limits}"""


class Homeserver:
    """A running Synapse: its URL, and the admin API calls the tests need."""

    def __init__(self, directory: Path, *, stock_rate_limits: bool = False) -> None:
        self.directory = directory
        self.stock_rate_limits = stock_rate_limits
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.shared_secret = secrets.token_hex(16)
        self.process: subprocess.Popen[bytes] | None = None
        self.log = directory / "homeserver.log"
        self._admin: MatrixUser | None = None

    def start(self) -> None:
        python = synapse_python()
        config = self.directory / "homeserver.yaml"
        config.write_text(
            _config(self.directory, self.port, self.shared_secret, stock_rate_limits=self.stock_rate_limits)
        )
        base = [str(python), "-m", "synapse.app.homeserver", "-c", str(config)]
        env = {key: value for key, value in os.environ.items() if not key.startswith(("DJANGO_", "PYTHON"))}
        subprocess.run([*base, "--generate-keys"], check=True, capture_output=True, env=env, cwd=self.directory)
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(base, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=self.directory)
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"Synapse exited ({self.process.returncode}):\n{self.log.read_text()[-3000:]}")
            try:
                if httpx2.get(f"{self.url}/_matrix/client/versions", timeout=2).status_code == 200:
                    return
            except httpx2.HTTPError:
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"Synapse did not answer within {START_SECONDS:g} s:\n{self.log.read_text()[-3000:]}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def register(self, localpart: str, *, admin: bool = False) -> MatrixUser:
        """A new user through the shared-secret registration API (no captcha, no e-mail)."""
        endpoint = f"{self.url}/_synapse/admin/v1/register"
        nonce = httpx2.get(endpoint, timeout=10).json()["nonce"]
        password = secrets.token_hex(8)
        # The MAC covers the parts separated by NULs, without a trailing one.
        parts = (nonce, localpart, password, "admin" if admin else "notadmin")
        mac = hmac.new(self.shared_secret.encode(), b"\x00".join(p.encode() for p in parts), hashlib.sha1)
        body = {"nonce": nonce, "username": localpart, "password": password, "admin": admin, "mac": mac.hexdigest()}
        response = httpx2.post(endpoint, json=body, timeout=30)
        response.raise_for_status()
        answer = response.json()
        return MatrixUser(user_id=answer["user_id"], access_token=answer["access_token"], password=password)

    def admin(self) -> MatrixUser:
        if self._admin is None:
            self._admin = self.register(f"admin-{secrets.token_hex(4)}", admin=True)
        return self._admin

    def ratelimit_override(self, user_id: str, *, per_second: int, burst: int) -> None:
        """Give one user a message rate limit of its own (Synapse's admin API takes whole numbers)."""
        response = httpx2.post(
            f"{self.url}/_synapse/admin/v1/users/{user_id}/override_ratelimit",
            json={"messages_per_second": per_second, "burst_count": burst},
            headers={"Authorization": f"Bearer {self.admin().access_token}"},
            timeout=10,
        )
        response.raise_for_status()
