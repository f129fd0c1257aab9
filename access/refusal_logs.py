"""Log lines about refused input: one line each, and only so many a minute.

Anyone who can reach Hermes can send it malformed input, and each refusal is worth a line in the log
— but not a traceback, and not without bound: a 229-byte malformed JSON-RPC request used to write
a kilobyte of the A2A SDK's traceback, a foreign `Host` two of Django's, so a client without any
token could fill the disk. `RefusalLogFilter` sits on the console handler (`common.logs.logging_config`)
and, for the loggers that report refused input, does two things:

- a record carrying an exception becomes one line, `message: ExceptionType: text`, unless the log
  level is DEBUG, where a developer wants the whole traceback; every line is cut to `SUMMARY_CHARS`
  (the SDK repeats a client's whole parse error in each of its lines);
- at most `LINES_PER_WINDOW` lines per logger pass in `WINDOW_SECONDS`; the first line after that
  says how many were left out, so a flood still shows in the log, as one line a minute.

The loggers are Hermes's own `access` (network, host, origin, identity, body and size refusals), the
A2A SDK's (`a2a`: its request handlers, both protocol versions, log a traceback for every request
they cannot parse; Hermes's own A2A code logs as `interop`) and Django's `django.security`
(suspicious requests, e.g. too many form fields). Errors of Hermes's own
code are not touched: they keep their tracebacks, and no input should cause one.
"""

from __future__ import annotations

import logging
import threading
import time

REFUSAL_LOGGERS = ("access", "a2a", "django.security")
WINDOW_SECONDS = 60.0
LINES_PER_WINDOW = 30
SUMMARY_CHARS = 300


class RefusalLogFilter(logging.Filter):
    def __init__(self, name: str = "") -> None:
        super().__init__(name)
        self._lock = threading.Lock()
        # Per logger: when its window started, lines passed in it, lines left out of it.
        self._windows: dict[str, tuple[float, int, int]] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        family = _refusal_family(record.name)
        if family is None:
            return True
        passed, suppressed = self._admit(family, time.monotonic())
        if not passed:
            return False
        if not logging.getLogger().isEnabledFor(logging.DEBUG):
            _one_line(record)
        if suppressed:
            record.msg = f"{record.getMessage()} ({suppressed} similar line(s) left out in the last minute)"
            record.args = None
        return True

    def _admit(self, family: str, now: float) -> tuple[bool, int]:
        """Whether a line of `family` may pass now, and how many were left out before it."""
        with self._lock:
            started, lines, suppressed = self._windows.get(family, (now, 0, 0))
            if now - started >= WINDOW_SECONDS:
                started, lines = now, 0
            if lines >= LINES_PER_WINDOW:
                self._windows[family] = (started, lines, suppressed + 1)
                return False, 0
            self._windows[family] = (started, lines + 1, 0)
            return True, suppressed


def _refusal_family(name: str) -> str | None:
    for family in REFUSAL_LOGGERS:
        if name == family or name.startswith(family + "."):
            return family
    return None


def _one_line(record: logging.LogRecord) -> None:
    """The record as one line of at most SUMMARY_CHARS: its exception summarized, its traceback dropped."""
    try:
        message = record.getMessage()
    except Exception:  # a broken format string: keep the template, drop the arguments
        message = str(record.msg)
    message = " ".join(message.split()) if "\n" in message or "\r" in message else message
    error = record.exc_info[1] if record.exc_info else None
    if error is not None:
        detail = " ".join(str(error).split())
        message = f"{message}: {type(error).__name__}" + (f": {detail}" if detail else "")
    if len(message) > SUMMARY_CHARS:
        message = message[: SUMMARY_CHARS - 1] + "…"
    record.msg, record.args = message, None
    record.exc_info, record.exc_text = None, None
