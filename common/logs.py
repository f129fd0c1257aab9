"""Structured logs: every line of a turn carries its correlation id, and no line carries a secret.

- `turn_context_set()` is called at the start of a turn's task; every record logged from that task,
  the tasks it starts and the threads `database_sync_to_async` runs for it carries `correlation_id`
  (the turn id) and `session_id`.
- `log_event()` writes one milestone (`turn.finished`, `tool.call`, ...) as a grep-able
  `event key=value ...` message whose fields also appear as JSON keys.
- `TurnContextFilter`, `access.refusal_logs.RefusalLogFilter` and `RedactFilter` sit on every
  handler; `TextFormatter` (the default) and `JsonFormatter` (`HERMES_LOG_FORMAT=json`, one JSON
  object per line) format the records.
"""

from __future__ import annotations

import contextvars
import datetime
import json
import logging
from typing import Any

from common.redaction import redact, redact_value

LOG_FORMATS = ("text", "json")

_correlation_id: contextvars.ContextVar[str | None] = contextvars.ContextVar("hermes_correlation_id", default=None)
_session_id: contextvars.ContextVar[str | None] = contextvars.ContextVar("hermes_session_id", default=None)

# Attributes every LogRecord has; anything else on a record came from `extra=`.
_RECORD_ATTRIBUTES = frozenset(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime"}
_CONTEXT_KEYS = ("correlation_id", "session_id")


def turn_context_set(*, correlation_id: str, session_id: str) -> None:
    """Tag every record logged from now on in this context (a turn's task) with the turn's ids."""
    _correlation_id.set(correlation_id)
    _session_id.set(session_id)


def log_event(logger: logging.Logger, event: str, *, level: int = logging.INFO, **fields: Any) -> None:
    """Log one milestone: message `event key=value ...`; with JSON logs each field is a key too."""
    parts = [event, *(f"{key}={_logfmt(value)}" for key, value in fields.items() if value is not None)]
    logger.log(level, " ".join(parts), extra={"event": event, "fields": fields}, stacklevel=2)


def _logfmt(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    if text == "" or any(char in text for char in ' "=\n\t'):
        return json.dumps(text, ensure_ascii=False)
    return text


class TurnContextFilter(logging.Filter):
    """Adds `correlation_id` and `session_id` of the current turn (None outside a turn)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "correlation_id", None) is None:
            record.correlation_id = _correlation_id.get()
        if getattr(record, "session_id", None) is None:
            record.session_id = _session_id.get()
        return True


class RedactFilter(logging.Filter):
    """Replaces every configured secret value in the message, fields and traceback of a record.

    It rewrites the record in place (message rendered, arguments dropped), so every handler after it
    sees the redacted text.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a broken format string must not let its arguments through unredacted
            message = f"{record.msg} {record.args!r}"
        record.msg, record.args = redact(message), None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        for key, value in list(record.__dict__.items()):
            if key not in _RECORD_ATTRIBUTES:
                setattr(record, key, redact_value(value))
        return True


def _timestamp(record: logging.LogRecord) -> str:
    moment = datetime.datetime.fromtimestamp(record.created, tz=datetime.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class TextFormatter(logging.Formatter):
    """`2026-11-30T10:00:00.000Z INFO agent.engine message correlation_id=… session_id=…`."""

    def format(self, record: logging.LogRecord) -> str:
        line = f"{_timestamp(record)} {record.levelname} {record.name} {record.getMessage()}"
        for key in _CONTEXT_KEYS:
            value = getattr(record, key, None)
            if value:
                line += f" {key}={value}"
        extra = self._exception_text(record)
        return f"{line}\n{extra}" if extra else line

    def _exception_text(self, record: logging.LogRecord) -> str:
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        parts = [part for part in (record.exc_text, record.stack_info and self.formatStack(record.stack_info)) if part]
        return "\n".join(parts)


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, message, the event and its fields, the turn's ids."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": _timestamp(record),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        event = getattr(record, "event", None)
        if event:
            entry["event"] = event
            fields = getattr(record, "fields", None) or {}
            entry.update({key: value for key, value in fields.items() if key not in entry and value is not None})
        for key in _CONTEXT_KEYS:
            value = getattr(record, key, None)
            if value:
                entry[key] = value
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            entry["exception"] = record.exc_text
        if record.stack_info:
            entry["stack"] = record.stack_info
        return json.dumps(entry, ensure_ascii=False, default=str)


def logging_config(*, log_format: str, level: str) -> dict[str, Any]:
    """The `LOGGING` setting: one console handler (stderr) with both filters, for every logger.

    Django's own loggers are routed through it too, so nothing reaches the console unredacted or
    in another format; so is every stdio MCP server's stderr (`agent.tools.stderr`). Loggers whose
    DEBUG lines are whole payloads (request bodies, template contexts, SQL parameters) stay at INFO.
    """
    formatter = {"json": "common.logs.JsonFormatter", "text": "common.logs.TextFormatter"}[log_format]
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {
            "turn_context": {"()": "common.logs.TurnContextFilter"},
            "redact": {"()": "common.logs.RedactFilter"},
            # Refused input is logged as one line, and only so many a minute (access.refusal_logs).
            "refusals": {"()": "access.refusal_logs.RefusalLogFilter"},
        },
        "formatters": {"hermes": {"()": formatter}},
        "handlers": {
            "console": {
                "class": "logging.StreamHandler",
                "formatter": "hermes",
                "filters": ["turn_context", "refusals", "redact"],
            },
        },
        "root": {"handlers": ["console"], "level": level},
        "loggers": {
            # Replace the handlers Django's default configuration gives these (unfiltered ones).
            "django": {"handlers": [], "level": "NOTSET", "propagate": True},
            "django.server": {"handlers": [], "level": "NOTSET", "propagate": True},
            "httpx2": {"level": "WARNING"},
            "httpcore2": {"level": "WARNING"},
            "mcp": {"level": "WARNING"},
            # The A2A client: classic httpx logs every request, the SDK every agent card it reads.
            "httpx": {"level": "WARNING"},
            "a2a": {"level": "WARNING"},
            # Quiet even at HERMES_LOG_LEVEL=DEBUG, because their DEBUG lines are whole payloads: the
            # Anthropic SDK logs every request body (system prompt, history, tools, the model's
            # thinking), Django's template
            # engine the whole context of a failed variable lookup (CSRF token included), sse-starlette
            # every chunk of an A2A stream, and Django's SQL log (with DEBUG=True) every statement with
            # its parameters, message texts included.
            "anthropic": {"level": "INFO"},
            "sse_starlette": {"level": "INFO"},
            "django.template": {"level": "INFO"},
            "django.db.backends": {"level": "INFO"},
        },
    }


def console_quiet(level: int = logging.WARNING) -> None:
    """Show only records of `level` and above on the console, whatever the loggers' own levels
    (a terminal command whose output is its answer, `manage.py ask`)."""
    root = logging.getLogger()
    root.setLevel(max(root.level, level))
    for handler in root.handlers:
        handler.setLevel(max(handler.level, level))
