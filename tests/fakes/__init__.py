"""Fakes of the systems Hermes talks to, each a real server on loopback."""

from __future__ import annotations

from tests.fakes.anthropic_api import DEFAULT_API_KEY, DEFAULT_MODELS, FakeAnthropic, RecordedRequest
from tests.fakes.anthropic_script import ApiError, Reply, redacted_thinking, text, thinking, tool_use

__all__ = [
    "DEFAULT_API_KEY",
    "DEFAULT_MODELS",
    "ApiError",
    "FakeAnthropic",
    "RecordedRequest",
    "Reply",
    "redacted_thinking",
    "text",
    "thinking",
    "tool_use",
]
