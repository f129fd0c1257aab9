"""The per-area settings accessors read the settings at each use, so a changed setting is seen."""

from __future__ import annotations

from pytest_django.fixtures import Settings

from access.config import AccessConfig
from agent.budget import BudgetConfig
from agent.llm import ModelConfig
from interop.config import A2AConfig
from watch.config import WatchConfig


def test_each_accessor_reads_the_settings_of_the_moment(settings: Settings) -> None:
    settings.HERMES_AUTH = "django"
    settings.HERMES_STAFF_GROUPS = ["admins"]
    settings.HERMES_DAILY_TOKEN_BUDGET = 1000
    settings.HERMES_MODELS = ("m1", "m2")
    settings.HERMES_A2A_PUBLIC_URL = "https://hermes.example/"
    settings.HERMES_A2A_RATE_LIMIT = 3
    settings.HERMES_WATCH_BACKLOG = "replay"

    assert (AccessConfig.from_settings().auth, AccessConfig.from_settings().staff_groups) == ("django", ("admins",))
    assert BudgetConfig.from_settings().daily == 1000
    assert ModelConfig.from_settings().models == ("m1", "m2")
    assert A2AConfig.from_settings().public_url == "https://hermes.example"
    assert A2AConfig.from_settings().rate_limit == 3
    assert WatchConfig.from_settings().backlog == "replay"
