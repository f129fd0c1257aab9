"""The bridge's settings and what it posts, without a homeserver: bad settings get clear errors,
model text never reaches Matrix as raw HTML."""

from __future__ import annotations

import pytest
from pytest_django.fixtures import Settings

from matrix.config import MatrixConfigError, MatrixSettings, operators_parse
from matrix.render import (
    ToolLine,
    answer_content,
    card_content,
    edit_content,
    escalation_content,
    schedule_run_content,
)


class TestSettings:
    def test_operators_map_matrix_users_to_operator_names(self) -> None:
        assert operators_parse(" @alice:example.net=alice, @bob:hs.example.org=bob ") == {
            "@alice:example.net": "alice",
            "@bob:hs.example.org": "bob",
        }

    @pytest.mark.parametrize("raw", ["alice=alice", "@alice:example.net", "@alice:example.net=al ice", ""])
    def test_a_malformed_operator_map_is_refused_naming_the_variable(self, raw: str) -> None:
        with pytest.raises(MatrixConfigError, match="HERMES_MATRIX_OPERATORS"):
            operators_parse(raw)

    def test_rooms_are_room_ids_and_the_escalation_room_is_served_too(self, settings: Settings) -> None:
        settings.HERMES_MATRIX_HOMESERVER = "https://matrix.example.net"
        settings.HERMES_MATRIX_USER_ID = "@hermes:example.net"
        settings.HERMES_MATRIX_ACCESS_TOKEN = "syt_secret_token_value"
        settings.HERMES_MATRIX_OPERATORS = "@alice:example.net=alice"
        settings.HERMES_MATRIX_ROOMS = ["#ops:example.net"]
        with pytest.raises(MatrixConfigError, match="room ids"):
            MatrixSettings.from_settings()
        settings.HERMES_MATRIX_ROOMS = ["!ops:example.net"]
        settings.HERMES_MATRIX_ESCALATION_ROOM = "!alerts:example.net"
        config = MatrixSettings.from_settings()
        assert config.rooms == {"!ops:example.net", "!alerts:example.net"}
        settings.HERMES_MATRIX_USER_ID = "hermes"
        with pytest.raises(MatrixConfigError, match="HERMES_MATRIX_USER_ID"):
            MatrixSettings.from_settings()


class TestContent:
    def test_the_final_answer_is_sanitised_html_and_tool_lines_are_escaped(self) -> None:
        text = "**caddy** is fine <script>alert(1)</script> [x](javascript:alert(2)) <img src=x onerror=y>"
        tools = [ToolLine(server="oikos", tool="<b>tail_log</b>", duration_ms=12, state="failed")]
        content = answer_content(text=text, tools=tools, final=True)
        html = content["formatted_body"]
        assert "<strong>caddy</strong>" in html
        assert "<script" not in html and "<img" not in html and 'href="javascript' not in html
        assert "&lt;script&gt;" in html  # shown as text, never run
        assert "&lt;b&gt;tail_log&lt;/b&gt;" in html
        # The answer first (what a notification shows), the tool lines after it.
        assert content["msgtype"] == "m.text"
        assert content["body"].startswith("**caddy** is fine")
        assert content["body"].endswith("\n\n▸ oikos · <b>tail_log</b> · 12 ms · failed")

    def test_a_streaming_answer_is_a_plain_text_notice_marked_unfinished(self) -> None:
        content = answer_content(text="Checking", tools=[ToolLine(server="oikos", tool="whoami")], final=False)
        # A notice: stock push rules never notify for it (the final answer, an m.text, does).
        assert content == {"msgtype": "m.notice", "body": "Checking …\n\n▸ oikos · whoami · running"}

    def test_an_edit_replaces_the_message_with_a_marked_fallback(self) -> None:
        edit = edit_content("$answer", {"msgtype": "m.text", "body": "Done."})
        assert edit["m.relates_to"] == {"rel_type": "m.replace", "event_id": "$answer"}
        assert edit["m.new_content"] == {"msgtype": "m.text", "body": "Done."}
        assert edit["body"] == "* Done."

    def test_cards_and_escalations_escape_what_the_agent_wrote(self) -> None:
        card = card_content(
            request={
                "action": "deploy",
                "target": "service:x",
                "risk_class": "config_mutation",
                "reason": "<i>now</i>",
            },
            approval_id="apr-1",
            status="pending",
            decided_by="",
            via="",
            detail="",
        )
        assert "&lt;i&gt;now&lt;/i&gt;" in card["formatted_body"] and "reason: <i>now</i>" in card["body"]
        escalation = escalation_content(title="t", escalation={"summary": "<script>x</script>"})
        assert "<script>" not in escalation["formatted_body"]


class TestScheduleRun:
    HOSTILE = '<img src=x onerror="alert(1)">'

    def test_the_verdict_leads_in_bold_once_and_model_text_is_never_html(self) -> None:
        content = schedule_run_content(
            name="morning digest",
            state="done",
            skipped_reason="",
            when="Mon 7 Dec, 07:00 WET",
            verdict=f"1 degraded {self.HOSTILE}",
            answer=f"**1 degraded {self.HOSTILE}**\n\nsonarr is degraded.",
            link="https://hermes.example.net/ui/s/1/",
        )
        assert content["body"].startswith(f"1 degraded {self.HOSTILE}\n\nsonarr is degraded.")
        assert content["body"].count("1 degraded") == 1
        html = content["formatted_body"]
        assert html.startswith("<p><strong>1 degraded &lt;img")
        assert "<img" not in html
        assert '<a href="https://hermes.example.net/ui/s/1/">Open in the control room</a>' in html

    def test_a_run_skipped_for_the_budget_or_failed_is_one_line(self) -> None:
        skipped = schedule_run_content(
            name="certs",
            state="skipped",
            skipped_reason="budget",
            when="Sun 6 Dec, 09:00 UTC",
            verdict="",
            answer="",
            link="",
        )
        assert skipped["body"].startswith("⏭️ certs (Sun 6 Dec, 09:00 UTC) did not run: the daily token budget is spent")
        assert "\n" not in skipped["body"]
        failed = schedule_run_content(
            name="certs", state="failed", skipped_reason="", when="Sun 6 Dec, 09:00 UTC", verdict="", answer="", link=""
        )
        assert failed["body"] == "⚠️ certs (Sun 6 Dec, 09:00 UTC) did not finish: the run failed."
