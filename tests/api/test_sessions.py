"""`GET /sessions` and `GET /sessions/<id>`, and the links Hermes builds at the root and behind a prefix."""

from __future__ import annotations

import datetime
from collections.abc import Callable

import httpx2

from tests.api.conftest import Hermes, chat, hermes_env
from tests.fakes import FakeAnthropic, Reply
from tests.fakes.daphne import DaphneServer
from tests.fakes.mcp_servers import MCPTestServer
from tests.fakes.scripted_models import DegradedInvestigator

PREFIX = "/agent"


def new_session(url: str, message: str, session_id: str | None = None) -> str:
    body = {"message": message} if session_id is None else {"message": message, "session_id": session_id}
    stream = chat(url, body)
    assert stream.status == 200, stream.events
    return stream.events[-1].data["session_id"]


class TestList:
    def test_most_recently_active_first_with_links_to_each_session_and_page(self, hermes: Hermes) -> None:
        first = new_session(hermes.url, "first question")
        second = new_session(hermes.url, "second question")
        third = new_session(hermes.url, "third question")
        new_session(hermes.url, "back to the first", session_id=first)

        page1 = httpx2.get(f"{hermes.url}/sessions", params={"page_size": 2}).json()
        assert [s["id"] for s in page1["sessions"]] == [first, third]
        assert page1["sessions"][0]["url"] == f"/sessions/{first}"
        assert (page1["sessions"][0]["title"], page1["sessions"][0]["turn_count"]) == ("first question", 2)
        assert page1["next"] == "/sessions?page=2&page_size=2" and page1["previous"] is None
        assert page1["count"] >= 3 and page1["page_count"] == -(-page1["count"] // 2)

        page2 = httpx2.get(f"{hermes.url}{page1['next']}").json()
        assert page2["sessions"][0]["id"] == second
        assert page2["previous"] == "/sessions?page=1&page_size=2"
        assert httpx2.get(f"{hermes.url}{page1['sessions'][1]['url']}").json()["title"] == "third question"

    def test_defaults_to_pages_of_twenty(self, hermes: Hermes) -> None:
        listed = httpx2.get(f"{hermes.url}/sessions").json()
        assert (listed["page"], listed["page_size"]) == (1, 20)
        assert len(listed["sessions"]) == min(20, listed["count"])


class TestDetail:
    def test_messages_are_content_blocks_and_turns_carry_status_usage_and_timings(self, hermes: Hermes) -> None:
        hermes.model.responder = DegradedInvestigator()
        session_id = new_session(hermes.url, "what's degraded and what depends on it?")

        detail = httpx2.get(f"{hermes.url}/sessions/{session_id}").json()

        assert detail["id"] == session_id and detail["url"] == f"/sessions/{session_id}"
        (turn,) = detail["turns"]
        assert (turn["status"], turn["stop_reason"], turn["iterations"], turn["error"]) == ("done", "end_turn", 3, "")
        assert set(turn["usage"]) >= {"input_tokens", "output_tokens", "cache_read_input_tokens"}
        started = datetime.datetime.fromisoformat(turn["started_at"])
        finished = datetime.datetime.fromisoformat(turn["finished_at"])
        assert started <= finished and turn["duration_ms"] >= 0
        blocks = [(m["role"], [b["type"] for b in m["content"]]) for m in detail["messages"]]
        assert blocks == [
            ("user", ["text"]),
            ("assistant", ["tool_use"]),
            ("user", ["tool_result"]),
            ("assistant", ["tool_use"]),
            ("user", ["tool_result"]),
            ("assistant", ["text"]),
        ]
        assert all(m["turn_id"] == turn["id"] for m in detail["messages"])
        assert detail["messages"][1]["content"][0]["name"] == "mcp__oikos__get_health_summary"


class TestLinks:
    def test_at_the_root_links_have_no_prefix(self, hermes: Hermes) -> None:
        assert httpx2.get(f"{hermes.url}/openapi.json").json()["servers"] == [{"url": "/"}]
        assert httpx2.get(f"{hermes.url}/admin/").headers["location"].startswith("/admin/login/")

    def test_behind_a_prefix_stripping_proxy_every_link_carries_the_prefix(
        self,
        daphne_server: Callable[..., DaphneServer],
        fake_llm: FakeAnthropic,
        mcp_http_server: MCPTestServer,
    ) -> None:
        server = daphne_server(env=hermes_env(fake_llm, mcp_http_server, HERMES_URL_PREFIX=PREFIX))
        fake_llm.enqueue(Reply.text("One."), Reply.text("Two."))

        def proxy(link: str) -> str:
            """Where a proxy mapping /agent/* to Hermes (and stripping it) sends a link."""
            assert link.startswith(f"{PREFIX}/"), link
            return server.url + link.removeprefix(PREFIX)

        # Requests arrive with the prefix already stripped, as the proxy forwards them.
        older = new_session(server.url, "one?")
        newer = new_session(server.url, "two?")
        listed = httpx2.get(f"{server.url}/sessions", params={"page_size": 1}).json()

        assert listed["sessions"][0]["url"] == f"{PREFIX}/sessions/{newer}"
        assert listed["next"] == f"{PREFIX}/sessions?page=2&page_size=1"
        page2 = httpx2.get(proxy(listed["next"])).json()
        assert page2["sessions"][0]["id"] == older
        assert page2["previous"] == f"{PREFIX}/sessions?page=1&page_size=1"
        detail = httpx2.get(proxy(page2["sessions"][0]["url"])).json()
        assert detail["url"] == f"{PREFIX}/sessions/{older}"
        assert httpx2.get(f"{server.url}/openapi.json").json()["servers"] == [{"url": PREFIX}]
        assert httpx2.get(f"{server.url}/admin/").headers["location"].startswith(f"{PREFIX}/admin/login/")
        # A proxy that forwards the prefix unstripped reaches the same routes.
        assert httpx2.get(f"{server.url}{PREFIX}/sessions/{older}").json()["id"] == older
