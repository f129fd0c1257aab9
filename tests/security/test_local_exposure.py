"""`local` mode beyond loopback is announced loudly: at start-up, by `check`, and on first contact."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

import access.exposure
from tests.fakes.subprocesses import manage
from tests.security.asgi_client import MESH_PEER, http
from tests.security.subprocesses import clean_environment, python

pytestmark = pytest.mark.django_db(transaction=True)

START_ASGI = "import hermes_site.asgi"


@pytest.mark.parametrize("bind", ["0.0.0.0", "::", "100.101.102.103"])
def test_starting_the_server_in_local_mode_beyond_loopback_warns(tmp_path: Path, bind: str) -> None:
    result = python(START_ASGI, env=clean_environment(tmp_path, HERMES_BIND=bind))

    assert result.returncode == 0, result.stderr
    assert "SECURITY WARNING: HERMES_AUTH=local while Hermes listens on " + bind in result.stderr


@pytest.mark.parametrize(
    "env",
    [{"HERMES_BIND": "127.0.0.1"}, {"HERMES_BIND": "localhost"}, {"HERMES_BIND": "0.0.0.0", "HERMES_AUTH": "django"}],
    ids=["loopback", "localhost", "django-mode"],
)
def test_no_warning_when_there_is_nothing_to_warn_about(tmp_path: Path, env: dict[str, str]) -> None:
    result = python(START_ASGI, env=clean_environment(tmp_path, **env))

    assert result.returncode == 0, result.stderr
    assert "SECURITY WARNING" not in result.stderr


def test_manage_check_reports_it(tmp_path: Path) -> None:
    result = manage("check", env=clean_environment(tmp_path, HERMES_BIND="0.0.0.0"))

    assert "access.W001" in result.stderr


async def test_the_first_connection_on_a_non_loopback_address_warns_once(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(access.exposure, "_noted_connection", False)

    with caplog.at_level(logging.WARNING, logger="access"):
        await http("/accounts/login/", peer="127.0.0.1", server=("127.0.0.1", 8000))
        assert not caplog.records, "loopback is what local mode is for"
        await http("/accounts/login/", peer=MESH_PEER, server=("100.64.0.2", 8000))
        await http("/accounts/login/", peer=MESH_PEER, server=("100.64.0.2", 8000))

    warnings = [record.getMessage() for record in caplog.records if "SECURITY WARNING" in record.getMessage()]
    assert len(warnings) == 1
    assert "listens on 100.64.0.2" in warnings[0]
