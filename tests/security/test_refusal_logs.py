"""Refused input is logged as one short line, and only so many a minute: a client without a token
cannot fill the disk with tracebacks. Other errors keep their tracebacks."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import pytest

from access import refusal_logs
from access.refusal_logs import LINES_PER_WINDOW, WINDOW_SECONDS, RefusalLogFilter
from common.logs import RedactFilter, TextFormatter


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    clock = Clock()
    monkeypatch.setattr(refusal_logs.time, "monotonic", clock)
    return clock


@pytest.fixture
def output() -> Iterator[io.StringIO]:
    """The console handler's filters and format, writing to a buffer, on the loggers these tests use."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(RefusalLogFilter())
    handler.addFilter(RedactFilter())
    handler.setFormatter(TextFormatter())
    loggers = [logging.getLogger(name) for name in ("a2a.server.routes.jsonrpc_dispatcher", "access", "agent.engine")]
    for logger in loggers:
        logger.addHandler(handler)
        logger.propagate = False
    yield stream
    for logger in loggers:
        logger.removeHandler(handler)
        logger.propagate = True


def _parse_failure(logger: logging.Logger) -> None:
    try:
        raise ValueError("Failed to parse text field: expected string or bytes-like object, got 'int'\n" + "x" * 2000)
    except ValueError:
        logger.exception("Failed to parse request params")


def test_a_library_traceback_about_a_bad_request_becomes_one_short_line(output: io.StringIO, clock: Clock) -> None:
    _parse_failure(logging.getLogger("a2a.server.routes.jsonrpc_dispatcher"))

    lines = output.getvalue().splitlines()
    assert len(lines) == 1
    assert "Failed to parse request params: ValueError: Failed to parse text field" in lines[0]
    assert len(lines[0]) < refusal_logs.SUMMARY_CHARS + 100
    assert "Traceback" not in output.getvalue()


def test_a_flood_of_refusals_writes_a_bounded_number_of_lines_and_says_how_many_it_left_out(
    output: io.StringIO, clock: Clock
) -> None:
    logger = logging.getLogger("access")
    for index in range(500):
        logger.warning("refused http '/a2a/tasks' from 127.0.0.1: host 'evil%d.example' is not allowed", index)

    assert len(output.getvalue().splitlines()) == LINES_PER_WINDOW

    clock.now += WINDOW_SECONDS
    logger.warning("refused http '/a2a/tasks' from 127.0.0.1: host 'evil.example' is not allowed")

    last = output.getvalue().splitlines()[-1]
    assert last.endswith(f"({500 - LINES_PER_WINDOW} similar line(s) left out in the last minute)")


def test_each_kind_has_its_own_allowance(output: io.StringIO, clock: Clock) -> None:
    for _ in range(LINES_PER_WINDOW + 5):
        _parse_failure(logging.getLogger("a2a.server.routes.jsonrpc_dispatcher"))
    logging.getLogger("access").warning("refused websocket: no websocket at '/ws/x/'")

    assert output.getvalue().splitlines()[-1].endswith("no websocket at '/ws/x/'")


def test_errors_of_hermes_itself_keep_their_traceback_and_are_not_limited(output: io.StringIO, clock: Clock) -> None:
    logger = logging.getLogger("agent.engine")
    for _ in range(LINES_PER_WINDOW + 5):
        try:
            raise RuntimeError("a bug")
        except RuntimeError:
            logger.exception("turn failed")

    assert output.getvalue().count("Traceback (most recent call last)") == LINES_PER_WINDOW + 5


def test_a_newline_in_a_refused_request_cannot_forge_a_log_line(output: io.StringIO, clock: Clock) -> None:
    logging.getLogger("access").warning("refused %s", "GET /x\n2026-01-01T00:00:00Z INFO access all fine")

    assert len(output.getvalue().splitlines()) == 1
