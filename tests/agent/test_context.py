"""The model's view of a stored session (`agent.conversation.context`): what is sent once a session was compacted."""

from __future__ import annotations

import uuid

from pytest_django.fixtures import Settings

from agent.conversation.context import (
    SUMMARY_HEADER,
    SessionContext,
    StoredMessage,
    context_window,
    context_window_learn,
)
from agent.conversation.history import messages_for_api
from tests.fakes import DEFAULT_MODELS
from tests.fakes.anthropic_validation import request_problem

TURN_1, TURN_2, TURN_3 = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
LOG = "x" * 5000


def session_rows() -> list[StoredMessage]:
    """Three turns; the second called a tool that answered 5,000 characters."""
    return [
        StoredMessage(1, TURN_1, "user", [{"type": "text", "text": "Remember that the code is ORCHID-7."}]),
        StoredMessage(2, TURN_1, "assistant", [{"type": "text", "text": "Noted."}]),
        StoredMessage(3, TURN_2, "user", [{"type": "text", "text": "Show me the log."}]),
        StoredMessage(4, TURN_2, "assistant", [{"type": "tool_use", "id": "toolu_1", "name": "big", "input": {}}]),
        StoredMessage(
            5,
            TURN_2,
            "user",
            [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": LOG}]}],
        ),
        StoredMessage(6, TURN_2, "assistant", [{"type": "text", "text": "Nothing alarming."}]),
        StoredMessage(7, TURN_3, "user", [{"type": "text", "text": "And now?"}]),
    ]


def summary(message_id: int, through: int, text: str) -> StoredMessage:
    return StoredMessage(
        message_id, TURN_3, "user", [{"type": "text", "text": SUMMARY_HEADER + text}], "summary", through
    )


def accepted(history: list[tuple[str, list[dict]]]) -> bool:
    body = {
        "model": DEFAULT_MODELS[0],
        "max_tokens": 100,
        "messages": messages_for_api(history),
        "tools": [{"name": "big", "input_schema": {"type": "object"}}],
    }
    return request_problem(body, known_models=DEFAULT_MODELS) is None


class TestTheModelsView:
    def test_without_compaction_every_message_is_sent_as_stored(self) -> None:
        rows = session_rows()
        assert SessionContext(messages=rows).history() == [(row.role, row.content) for row in rows]

    def test_old_tool_results_are_cleared_to_a_marker_and_the_pairing_stays_valid(self) -> None:
        history = SessionContext(messages=session_rows(), tool_results_cleared_through=6).history()

        [result] = history[4][1]
        assert result == {
            "type": "tool_result",
            "tool_use_id": "toolu_1",
            "content": f"[cleared: 5,000 chars; the ledger has it under correlation id {TURN_2}]",
        }
        assert history[3] == ("assistant", session_rows()[3].content)  # the call itself is kept
        assert accepted(history)

    def test_the_latest_summary_stands_for_the_messages_it_replaces(self) -> None:
        rows = [*session_rows(), summary(8, 2, "first"), summary(9, 6, "Facts: the code is ORCHID-7.")]
        history = SessionContext(messages=rows).history()

        assert history[0] == ("user", rows[-1].content)
        assert history[1:] == [("user", rows[6].content)]
        assert accepted(history)
        # The summary and the question it precedes go as one user message.
        assert [block["text"] for block in messages_for_api(history)[0]["content"]] == [
            SUMMARY_HEADER + "Facts: the code is ORCHID-7.",
            "And now?",
        ]

    def test_a_summary_of_the_first_turn_keeps_the_rest_verbatim(self) -> None:
        rows = [*session_rows(), summary(8, 2, "Facts: the code is ORCHID-7.")]
        history = SessionContext(messages=rows, tool_results_cleared_through=6).history()

        assert history[1] == ("user", rows[2].content)
        assert "cleared: 5,000 chars" in history[3][1][0]["content"]
        assert accepted(history)


class TestTheWindow:
    def test_the_family_default_a_setting_and_a_learned_window(self, settings: Settings) -> None:
        settings.HERMES_CONTEXT_WINDOW = 0
        assert context_window("claude-sonnet-5", server="http://a") == 200_000
        settings.HERMES_CONTEXT_WINDOW = 32_000
        assert context_window("claude-sonnet-5", server="http://a") == 32_000
        context_window_learn("claude-sonnet-5", server="http://learned.test", maximum=8_192)
        assert context_window("claude-sonnet-5", server="http://learned.test") == 8_192
        assert context_window("claude-sonnet-5", server="http://a") == 32_000
