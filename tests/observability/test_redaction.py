"""The redaction registry, and the log filters and formatters built on it."""

from __future__ import annotations

import asyncio
import contextvars
import io
import json
import logging
from collections.abc import Iterator

import pytest
from asgiref.sync import sync_to_async
from pytest_django.fixtures import Settings

from agent.tools import ToolHub
from agent.tools.config import mcp_config_parse
from common.logs import JsonFormatter, RedactFilter, TextFormatter, TurnContextFilter, log_event, turn_context_set
from common.redaction import REDACTED, redact, redact_value, secret_values, secrets_register

API_KEY = "sk-ant-api03-redaction-test-key"


@pytest.fixture
def configured(settings: Settings) -> Settings:
    settings.ANTHROPIC_API_KEY = API_KEY
    settings.OIKOS_MCP_TOKEN = "oikos-mcp-token-0042"
    settings.OIKOS_API_TOKEN = "oikos-rest-token-0043"
    settings.SECRET_KEY = "django-secret-key-for-redaction-tests"
    return settings


class TestRedact:
    def test_replaces_every_configured_secret(self, configured: Settings) -> None:
        text = (
            f"key={API_KEY} mcp=Bearer oikos-mcp-token-0042 rest=oikos-rest-token-0043 "
            "django=django-secret-key-for-redaction-tests"
        )
        assert redact(text) == f"key={REDACTED} mcp=Bearer {REDACTED} rest={REDACTED} django={REDACTED}"

    def test_values_of_variables_named_in_hermes_redact(
        self, configured: Settings, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("GARRA_TOKEN", "garra-token-value-99")
        monkeypatch.setenv("NOTES_PASSWORD", "notes-password-value")
        configured.HERMES_REDACT = ["GARRA_TOKEN", "NOTES_PASSWORD", "NOT_SET_ANYWHERE"]
        assert redact("garra-token-value-99 then notes-password-value") == f"{REDACTED} then {REDACTED}"

    def test_short_values_are_not_secrets(self, configured: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("SHORT_ONE", "true")
        configured.HERMES_REDACT = ["SHORT_ONE"]
        assert redact("debug is true") == "debug is true"
        assert "true" not in secret_values()

    def test_a_changed_setting_is_picked_up_at_once(self, configured: Settings) -> None:
        assert redact(API_KEY) == REDACTED
        configured.ANTHROPIC_API_KEY = "sk-ant-api03-rotated-key-7"
        assert redact(f"{API_KEY} sk-ant-api03-rotated-key-7") == f"{API_KEY} {REDACTED}"

    def test_the_tool_hub_registers_its_servers_secrets(self) -> None:
        configs = mcp_config_parse(
            {
                "mcpServers": {
                    "notes": {
                        "type": "http",
                        "url": "http://127.0.0.1:9/mcp",
                        "headers": {"Authorization": "Bearer hub-header-token-5150"},
                    },
                    "garra": {"command": "garra", "env": {"GARRA_HOME_TOKEN": "hub-env-token-6160"}},
                }
            },
            source="test",
            default_timeout=5,
            environ={},
        )
        assert redact("hub-header-token-5150") == "hub-header-token-5150"
        ToolHub(configs)
        assert redact("bearer hub-header-token-5150, env hub-env-token-6160") == f"bearer {REDACTED}, env {REDACTED}"

    def test_the_longest_secret_wins_and_regex_characters_are_literal(self, configured: Settings) -> None:
        secrets_register(["prefix-secret", "prefix-secret-and-more", "p@ss.w*rd+(x)"])
        assert redact("prefix-secret-and-more|prefix-secret|prefix-secret-and-mo|pXss.w*rd+(x)|p@ss.w*rd+(x)") == (
            f"{REDACTED}|{REDACTED}|{REDACTED}-and-mo|pXss.w*rd+(x)|{REDACTED}"
        )

    def test_a_long_secret_such_as_a_private_key(self, configured: Settings) -> None:
        key = "-----BEGIN PRIVATE KEY-----\n" + "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n" * 150 + "-----END PRIVATE KEY-----"
        secrets_register([key])
        assert redact(f"loaded {key} from disk") == f"loaded {REDACTED} from disk"

    def test_redact_value_walks_json_like_data(self, configured: Settings) -> None:
        value = {"content": [{"type": "text", "text": f"key {API_KEY}"}], "n": 3, "pair": (API_KEY, None)}
        assert redact_value(value) == {
            "content": [{"type": "text", "text": f"key {REDACTED}"}],
            "n": 3,
            "pair": (REDACTED, None),
        }


@pytest.fixture
def captured() -> Iterator[tuple[logging.Logger, io.StringIO, logging.Handler]]:
    """A logger whose one handler carries the filters Hermes puts on every handler."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(TurnContextFilter())
    handler.addFilter(RedactFilter())
    logger = logging.getLogger("tests.observability.captured")
    logger.handlers = [handler]
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    yield logger, stream, handler
    logger.handlers = []


class TestLogFilters:
    def test_json_lines_redact_messages_fields_and_tracebacks(
        self, configured: Settings, captured: tuple[logging.Logger, io.StringIO, logging.Handler]
    ) -> None:
        logger, stream, handler = captured
        handler.setFormatter(JsonFormatter())

        log_event(logger, "tool.call", server="oikos", tool="echo", error=f"rejected {API_KEY}")
        try:
            raise RuntimeError(f"connect failed with {API_KEY}")
        except RuntimeError:
            logger.exception("unexpected failure for %s", API_KEY)

        first, second = (json.loads(line) for line in stream.getvalue().splitlines() if line.startswith("{"))
        assert API_KEY not in stream.getvalue()
        assert first["message"] == f'tool.call server=oikos tool=echo error="rejected {REDACTED}"'
        assert (first["event"], first["server"], first["error"]) == ("tool.call", "oikos", f"rejected {REDACTED}")
        assert second["message"] == f"unexpected failure for {REDACTED}"
        assert f"RuntimeError: connect failed with {REDACTED}" in second["exception"]

    async def test_a_turns_context_tags_its_lines_and_no_others(
        self, captured: tuple[logging.Logger, io.StringIO, logging.Handler]
    ) -> None:
        logger, stream, handler = captured
        handler.setFormatter(TextFormatter())

        async def turn() -> None:
            turn_context_set(correlation_id="turn-1", session_id="session-1")
            logger.info("inside the turn")
            # How the engine reaches the database: a worker thread, context carried along by asgiref.
            await sync_to_async(logger.info)("in a worker thread")

        await asyncio.get_running_loop().create_task(turn(), context=contextvars.Context())
        logger.info("outside")

        inside, thread, outside = stream.getvalue().splitlines()
        assert inside.endswith(
            "INFO tests.observability.captured inside the turn correlation_id=turn-1 session_id=session-1"
        )
        assert thread.endswith("in a worker thread correlation_id=turn-1 session_id=session-1")
        assert outside.endswith("INFO tests.observability.captured outside")
