"""An MCP server that asks for input mid-call reaches the turn's elicitor, and the answer reaches
the server — over both protocol generations (the 2026 embedded requests and the handshake-era
`elicitation/create` request) — and who answers in a whole turn."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator

import pytest
from channels.db import database_sync_to_async

from agent.conversation.events import ElicitationEvent
from agent.elicitation.turn import NO_OPERATOR
from agent.elicitation.types import ElicitationAnswer, ElicitationAsk, ElicitationRecord
from agent.engine.runner import turn_start
from agent.models import Elicitation
from agent.tools import ToolHub
from agent.tools.context import ToolCallContext
from tests.agent.conftest import turn_collect
from tests.fakes import FakeAnthropic, Reply
from tests.fakes.mcp_fixtures import WriteMCPConfig, http_server_entry
from tests.fakes.mcp_servers import MCPTestServer, build_asking_server
from tests.fakes.scripted_models import last_tool_results


@pytest.fixture(scope="module", params=["current", "legacy"])
def deployer(request: pytest.FixtureRequest) -> Iterator[MCPTestServer]:
    with MCPTestServer(build=build_asking_server, legacy=request.param == "legacy") as server:
        yield server


@pytest.fixture
async def deployer_hub(deployer: MCPTestServer, mcp_config_file: WriteMCPConfig) -> AsyncIterator[ToolHub]:
    mcp_config_file({"deployer": http_server_entry(deployer, timeout=30)})
    hub = ToolHub.from_settings()
    yield hub
    await hub.aclose()


class Recorder:
    def __init__(self, answer: ElicitationAnswer) -> None:
        self.answer = answer
        self.asks: list[ElicitationAsk] = []

    async def __call__(self, ask: ElicitationAsk) -> ElicitationAnswer:
        self.asks.append(ask)
        return self.answer


@pytest.mark.django_db(transaction=True)
class TestHubElicitation:
    async def test_accepted_content_reaches_the_server(self, deployer_hub: ToolHub) -> None:
        content = {"reason": "new release", "environment": "production", "replicas": 3, "notify": False}
        recorder = Recorder(ElicitationAnswer(action="accept", content=content, answered_by="operator:ada"))
        outcome = await deployer_hub.call(
            "mcp__deployer__deploy", {"service": "jellyfin"}, context=ToolCallContext(elicitor=recorder)
        )
        text = outcome.content[0]["text"]
        assert text.startswith("deploy jellyfin: accepted ")
        assert json.loads(text.removeprefix("deploy jellyfin: accepted ")) == content
        [ask] = recorder.asks
        assert ask.server == "deployer" and ask.tool == "deploy"
        assert "<script>" in ask.message  # the server's words, as text; escaping is the renderer's job
        fields = {field.name: field for field in ask.fields}
        assert fields["reason"].required and fields["reason"].title == "Reason"
        assert [option.value for option in fields["environment"].options] == ["staging", "production"]
        assert fields["replicas"].kind == "integer" and fields["replicas"].default == 1
        assert fields["notify"].kind == "boolean" and fields["notify"].default is True

    @pytest.mark.parametrize("action", ["decline", "cancel"])
    async def test_decline_and_cancel_reach_the_server(self, deployer_hub: ToolHub, action: str) -> None:
        recorder = Recorder(ElicitationAnswer(action=action))  # type: ignore[arg-type]
        outcome = await deployer_hub.call(
            "mcp__deployer__deploy", {"service": "caddy"}, context=ToolCallContext(elicitor=recorder)
        )
        assert outcome.content[0]["text"] == f"deploy caddy: {action}"

    async def test_a_call_without_an_elicitor_declines(self, deployer_hub: ToolHub) -> None:
        outcome = await deployer_hub.call("mcp__deployer__deploy", {"service": "caddy"})
        assert outcome.content[0]["text"] == "deploy caddy: decline"


@pytest.mark.django_db(transaction=True)
class TestWhoAnswersInATurn:
    """A turn with nobody to ask (a peer's, an investigation's) declines; a frontend's answerer answers."""

    async def test_a_turn_nobody_follows_declines_and_says_why(self, llm: FakeAnthropic, deployer_hub: ToolHub) -> None:
        # A script's turn, with no answerer (a peer's turn is not even offered `deploy`, which writes).
        llm.enqueue(Reply.tool_use("mcp__deployer__deploy", {"service": "gitea"}), Reply.text("It was declined."))
        handle = await turn_start(text="deploy gitea", actor="operator:script", origin="cli", hub=deployer_hub)
        events = await turn_collect(handle)

        asked, answered = [event for event in events if isinstance(event, ElicitationEvent)]
        assert (asked.status, answered.status, answered.reason) == ("pending", "decline", NO_OPERATOR)
        assert last_tool_results(llm.requests[-1].body)[0]["content"][0]["text"] == "deploy gitea: decline"
        row = await database_sync_to_async(Elicitation.objects.get)(correlation_id=handle.turn_id)
        assert (row.status, row.answered_by) == ("decline", "hermes")

    async def test_a_frontends_answerer_answers(self, llm: FakeAnthropic, deployer_hub: ToolHub) -> None:
        async def operator(record: ElicitationRecord) -> ElicitationAnswer:
            return ElicitationAnswer(action="accept", content={"reason": "now"}, answered_by="operator:ada")

        llm.enqueue(Reply.tool_use("mcp__deployer__deploy", {"service": "gitea"}), Reply.text("Deployed."))
        handle = await turn_start(
            text="deploy gitea", actor="operator:ada", origin="ui", hub=deployer_hub, answerer=operator
        )
        await turn_collect(handle)
        result = last_tool_results(llm.requests[-1].body)[0]["content"][0]["text"]
        assert result.startswith('deploy gitea: accepted {"reason":"now"')
