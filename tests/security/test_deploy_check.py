"""`check --deploy` passes with the production settings docs/security.md documents, and start-up refuses
production without what it needs."""

from __future__ import annotations

import stat
from collections.abc import Callable
from pathlib import Path

import httpx2
import pytest

from tests.fakes.daphne import DaphneServer
from tests.fakes.subprocesses import REPO_ROOT, manage
from tests.security.subprocesses import clean_environment

# docs/security.md's production example ("Production settings"), with a key of the documented kind.
PRODUCTION = {
    "HERMES_ENV": "production",
    "HERMES_SECRET_KEY": "Zq8v1nS4-example-only-pV0tXc2LmRk9yB7wQe3JhUa6dGf5sNi0oTlEz",
    "HERMES_ALLOWED_HOSTS": "oikos.example.net",
    "HERMES_TRUSTED_PROXY": "true",
    "HERMES_TRUSTED_PROXY_CIDRS": "172.30.80.10/32",
    "HERMES_STAFF_GROUPS": "authentik Admins",
    "HERMES_URL_PREFIX": "/agent",
    "HERMES_BIND": "0.0.0.0",
}


def documented_production_settings() -> dict[str, str]:
    """The `NAME=value` lines of docs/security.md's "Production settings" block, comments dropped."""
    doc = (REPO_ROOT / "docs" / "security.md").read_text(encoding="utf-8")
    block = doc[doc.index("**Production settings.**") :].split("\n\n")[1]
    lines = (line.split("#")[0].strip() for line in block.splitlines())
    return dict(line.partition("=")[::2] for line in lines if line)


def test_the_production_example_here_is_the_documented_one() -> None:
    documented = documented_production_settings()

    assert documented.keys() == PRODUCTION.keys()
    assert {**documented, "HERMES_SECRET_KEY": PRODUCTION["HERMES_SECRET_KEY"]} == PRODUCTION


def test_the_documented_production_settings_pass_check_deploy(tmp_path: Path) -> None:
    result = manage("check", "--deploy", "--fail-level", "WARNING", env=clean_environment(tmp_path, **PRODUCTION))

    assert result.returncode == 0, result.stderr
    assert "no issues" in result.stdout


def test_the_shipped_compose_environment_passes_check_deploy(tmp_path: Path) -> None:
    example = {}
    for line in (REPO_ROOT / "docker" / "hermes.env.example").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, value = line.partition("=")
            example[name] = value
    example["HERMES_SECRET_KEY"] = PRODUCTION["HERMES_SECRET_KEY"]  # the one value it leaves to fill in

    result = manage("check", "--deploy", "--fail-level", "WARNING", env=clean_environment(tmp_path, **example))

    assert example["HERMES_ENV"] == "production"
    assert result.returncode == 0, result.stderr


def test_local_mode_does_not_pass_check_deploy(tmp_path: Path) -> None:
    env = clean_environment(tmp_path, **{**PRODUCTION, "HERMES_TRUSTED_PROXY": "false", "HERMES_BIND": "127.0.0.1"})

    result = manage("check", "--deploy", "--fail-level", "WARNING", env=env)

    assert result.returncode != 0
    assert "access.W002" in result.stderr


def test_an_allowed_network_of_everything_does_not_pass_check_deploy(tmp_path: Path) -> None:
    env = clean_environment(tmp_path, **PRODUCTION, HERMES_ALLOWED_CIDRS="0.0.0.0/0")

    result = manage("check", "--deploy", "--fail-level", "WARNING", env=env)

    assert result.returncode != 0
    assert "access.W003" in result.stderr


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"HERMES_SECRET_KEY": ""}, "HERMES_SECRET_KEY"),
        ({"HERMES_ALLOWED_HOSTS": ""}, "HERMES_ALLOWED_HOSTS"),
        ({"HERMES_DEBUG": "true"}, "HERMES_DEBUG"),
        ({"HERMES_TRUSTED_PROXY_CIDRS": ""}, "HERMES_TRUSTED_PROXY_CIDRS"),
        ({"HERMES_TRUSTED_PROXY_CIDRS": "10.0.0.300/8"}, "HERMES_TRUSTED_PROXY_CIDRS"),
        ({"HERMES_AUTH": "ldap"}, "HERMES_AUTH"),
        ({"HERMES_AUTH": "django"}, "HERMES_TRUSTED_PROXY"),
    ],
    ids=["no-secret-key", "no-hosts", "debug", "no-proxy-cidrs", "bad-cidr", "unknown-mode", "contradiction"],
)
def test_production_refuses_to_start_without_what_it_needs(tmp_path: Path, change: dict[str, str], named: str) -> None:
    result = manage("check", env=clean_environment(tmp_path, **{**PRODUCTION, **change}))

    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert named in result.stderr.strip().splitlines()[-1]


def test_development_needs_no_configuration_and_keeps_a_private_key(tmp_path: Path) -> None:
    result = manage("check", env=clean_environment(tmp_path))

    assert result.returncode == 0, result.stderr
    key_file = tmp_path / "secret_key"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert len(key_file.read_text()) >= 50
    code = "from django.conf import settings; print(settings.SECRET_KEY)"
    again = manage("shell", "-c", code, env=clean_environment(tmp_path))
    assert again.stdout.strip().splitlines()[-1] == key_file.read_text().strip(), "the same key on every start"


def test_production_redirects_browsers_to_https_but_answers_probes_over_http(
    daphne_server: Callable[..., DaphneServer],
) -> None:
    """As the container runs it: plain HTTP on its own port, the proxy's prefix forwarded or not."""
    env = {**PRODUCTION, "HERMES_ALLOWED_HOSTS": "127.0.0.1", "HERMES_BIND": "127.0.0.1"}
    hermes = daphne_server(env=env)

    for path in ("/healthz", "/agent/healthz", "/metrics", "/agent/metrics"):
        assert httpx2.get(f"{hermes.url}{path}").status_code in (200, 503), path
    for path in ("/sessions", "/agent/ui/"):
        response = httpx2.get(f"{hermes.url}{path}")
        assert response.status_code == 301, path
        assert response.headers["location"].startswith("https://127.0.0.1:"), path
