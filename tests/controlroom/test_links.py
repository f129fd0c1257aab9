"""Links out of the control room: Oikos's own ledger for a turn."""

from __future__ import annotations

import uuid

from pytest_django.fixtures import Settings

from controlroom.templatetags.controlroom import oikos_ledger_url

TURN = uuid.UUID("3d1080cf-b41b-40ef-ab89-16c38e6a6c1f")


def test_without_an_oikos_ledger_there_is_no_link(settings: Settings) -> None:
    settings.OIKOS_LEDGER_URL = ""
    assert oikos_ledger_url(str(TURN)) == ""


def test_the_correlation_id_fills_a_placeholder_or_becomes_a_query(settings: Settings) -> None:
    settings.OIKOS_LEDGER_URL = "https://oikos.example/ledger/{correlation_id}"
    assert oikos_ledger_url(str(TURN)) == f"https://oikos.example/ledger/{TURN}"
    settings.OIKOS_LEDGER_URL = "https://oikos.example/ledger?view=agent"
    assert oikos_ledger_url(str(TURN)) == f"https://oikos.example/ledger?view=agent&correlation_id={TURN}"
    settings.OIKOS_LEDGER_URL = "https://oikos.example/ledger"
    assert oikos_ledger_url(str(TURN)) == f"https://oikos.example/ledger?correlation_id={TURN}"
