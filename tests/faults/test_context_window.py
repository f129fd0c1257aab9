"""Long sessions against a model with a small context window: they never hit the wall.

The fake Messages API refuses a prompt over its window exactly as the API does (400
`invalid_request_error`, "prompt is too long: N tokens > M maximum"). The model is scripted but
knows only what each request holds (`RememberingModel`), so a fact from the first question is
answered at the end only if the summary kept it.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable

import pytest
from channels.db import database_sync_to_async
from django.test import AsyncClient
from django.utils.html import escape
from pytest_django.fixtures import Settings

from agent.conversation.events import Done, Error, Event, TextDelta
from agent.models import AgentSession, Message, Turn
from agent.tools import ToolHub
from tests.agent.conftest import ask
from tests.fakes import FakeAnthropic
from tests.fakes.anthropic_api import RecordedRequest
from tests.fakes.anthropic_cache import prompt_tokens
from tests.fakes.anthropic_wire import output_tokens
from tests.fakes.scripted_models import RememberingModel, request_text
from tests.observability.scrape import scrape

pytestmark = pytest.mark.django_db(transaction=True)

MODEL = "claude-sonnet-5"
FIRST = "Please remember that the maintenance code is ORCHID-7."
LAST = "What did I ask you to remember?"
DIVIDER = "earlier turns summarised for the model"


def questions(count: int) -> list[str]:
    """`count` questions: the fact first, the question about it last, tool-using ones between."""
    middle = [
        f"Show me the log of service-{k}." if k % 4 == 0 else f"Question {k}: how is service-{k} doing this week?"
        for k in range(2, count)
    ]
    return [FIRST, *middle, LAST]


def answer_of(events: list[Event]) -> str:
    return "".join(event.text for event in events if isinstance(event, TextDelta))


async def session_run(
    hub: ToolHub, asked: list[str], *, first_done: Callable[[], None] | None = None
) -> tuple[uuid.UUID, list[str]]:
    """Ask every question in one session; each must end `done` with no error shown."""
    session_id: uuid.UUID | None = None
    answers = []
    for index, question in enumerate(asked):
        handle, events = await ask(question, hub, session_id=session_id)
        errors = [event for event in events if isinstance(event, Error)]
        done = events[-1]
        assert not errors and isinstance(done, Done) and done.status == "done", (index + 1, question, errors)
        session_id = handle.session_id
        answers.append(answer_of(events))
        if first_done is not None and index == 0:
            first_done()
    assert session_id is not None
    return session_id, answers


def summarising(request: RecordedRequest) -> bool:
    system = request.body.get("system") or ""
    return "running summary" in (system if isinstance(system, str) else str(system))


@database_sync_to_async
def stored(session_id: uuid.UUID) -> tuple[AgentSession, list[Turn], list[Message]]:
    session = AgentSession.objects.get(pk=session_id)
    turns = list(Turn.objects.filter(session=session).order_by("started_at"))
    return session, turns, list(Message.objects.filter(session=session).order_by("id"))


def usage_total(turns: list[Turn], *keys: str) -> int:
    return sum(int(turn.usage.get(key, 0)) for turn in turns for key in keys)


PROMPT_KEYS = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")


class TestASessionOfFortyQuestions:
    async def test_never_fails_and_remembers_the_first_answer_through_the_summary(
        self, llm: FakeAnthropic, hub: ToolHub
    ) -> None:
        """The server's window is small and Hermes is not told (it assumes Claude's 200k): the first
        refusal is compacted and resent unseen, teaches Hermes the window, and later compactions
        come before the limit."""
        model = RememberingModel()
        llm.responder = model
        window: dict[str, int] = {}

        def narrow_the_window() -> None:
            # A window three times the first prompt (tools, system prompt, one question).
            window["tokens"] = 3 * prompt_tokens(llm.requests[0].body)
            llm.context_window = window["tokens"]

        before = await scrape()
        session_id, answers = await session_run(hub, questions(40), first_done=narrow_the_window)
        after = await scrape()

        session, turns, messages = await stored(session_id)
        requests = llm.requests
        refused = [request for request in requests if request.rejection is not None]
        summary_calls = [request for request in requests if summarising(request) and request.rejection is None]
        compaction_calls = usage_total(turns, "compaction_calls")
        print(
            f"\n40 questions, window {window['tokens']:,} tokens: {len(requests)} model requests, "
            f"{session.compactions} compactions, {compaction_calls} model calls spent summarising, "
            f"{len(refused)} request(s) refused as too long (each compacted and resent)"
        )

        # Answered correctly at the end, from the summary: the first question is no longer sent.
        assert "ORCHID-7" in answers[-1], answers[-1]
        last_request = request_text(requests[-1].body)
        assert FIRST not in last_request and "[Hermes: the earlier turns" in last_request
        assert "maintenance code is ORCHID-7" in last_request

        # Refusals were the window's, each followed by a compaction and an accepted resend.
        assert refused and all("prompt is too long" in r.rejection.message for r in refused if r.rejection)
        assert len(refused) == usage_total(turns, "too_long_retries")
        assert compaction_calls == len(summary_calls) == model.summaries >= 2
        assert session.compactions >= 2 and session.compacted_at is not None

        # The full history stays in the database and in the transcript.
        first_of_turn: dict[uuid.UUID, Message] = {}
        for message in messages:
            if message.kind == Message.Kind.MESSAGE and message.turn_id is not None:
                first_of_turn.setdefault(message.turn_id, message)
        assert [first_of_turn[turn.id].content[0]["text"] for turn in turns] == questions(40)
        summaries = [message for message in messages if message.kind == Message.Kind.SUMMARY]
        assert len(summaries) >= 2
        # The page shows the latest turns; "Earlier turns" leads back through the rest.
        client = AsyncClient()
        page = shown = latest = (await client.get(f"/ui/s/{session_id}/")).content.decode()
        while earlier := re.search(r'<a href="([^"]+)" rel="prev">Earlier turns</a>', shown):
            shown = (await client.get(earlier.group(1).replace("&amp;", "&"))).content.decode()
            page = shown + page
        assert all(escape(question) in page for question in questions(40))
        assert page.count(DIVIDER) == len(summaries)
        assert f"of {window['tokens']:,} tokens (" in latest and "last compacted" in latest

        # /sessions/<id> lists every message, the summaries marked, and the context in use.
        detail = (await AsyncClient().get(f"/sessions/{session_id}")).json()
        assert len(detail["messages"]) == len(messages)
        assert [m["id"] for m in detail["messages"] if m["kind"] == "summary"] == [m.id for m in summaries]
        context = detail["context"]
        assert context["window"] == window["tokens"] and 0 < context["tokens"] < window["tokens"]
        assert context["percent"] == round(100 * context["tokens"] / context["window"])
        assert context["compactions"] == session.compactions and context["compacted_at"]

        # Every token the API reported, compaction calls and resent requests included, is in the
        # turns' usage and in /metrics.
        served = [request for request in requests if request.rejection is None and request.reply is not None]
        prompt = sum(prompt_tokens(request.body) for request in served)
        output = sum(output_tokens(request.reply) for request in served if request.reply)
        assert usage_total(turns, *PROMPT_KEYS) == prompt
        assert usage_total(turns, "output_tokens") == output
        reported = sum(
            after.delta(before, "hermes_llm_tokens_total", model=MODEL, type=kind)
            for kind in ("input", "cache_read", "cache_write")
        )
        assert reported == prompt
        assert after.delta(before, "hermes_llm_tokens_total", model=MODEL, type="output") == output
        assert after.delta(before, "hermes_context_compaction_calls_total", model=MODEL) == compaction_calls
        assert after.delta(before, "hermes_llm_call_duration_seconds_count", model=MODEL, outcome="too_long") == len(
            refused
        )
        assert after.delta(before, "hermes_context_compactions_total", trigger="too_long", kind="summarised") >= 1


class TestCompactingBeforeTheLimit:
    async def test_a_known_window_is_never_exceeded_and_the_apis_token_counting_is_used(
        self, llm: FakeAnthropic, hub: ToolHub, settings: Settings
    ) -> None:
        model = RememberingModel()
        llm.responder = model

        def set_the_window() -> None:
            window = 3 * prompt_tokens(llm.requests[0].body)
            llm.context_window = window
            settings.HERMES_CONTEXT_WINDOW = window

        session_id, answers = await session_run(hub, questions(16), first_done=set_the_window)

        session, turns, _messages = await stored(session_id)
        print(
            f"\n16 questions: {session.compactions} compactions, {model.summaries} summarising calls, "
            f"{len(llm.token_counts)} token counts"
        )
        assert not llm.rejections  # every request fitted: compacted before, never refused
        assert "ORCHID-7" in answers[-1]
        assert session.compactions >= 2 and model.summaries >= 1
        assert llm.token_counts  # near the limit, turns start from the API's own count
        assert usage_total(turns, "too_long_retries") == 0

    async def test_old_tool_results_are_cleared_first_and_often_that_is_enough(
        self, llm: FakeAnthropic, hub: ToolHub, settings: Settings
    ) -> None:
        """Big tool results fill the context; clearing them for the model makes room without a
        summarising call, and the history stays valid (the fake checks every tool_use is answered)."""
        model = RememberingModel(log_bytes=6000)
        llm.responder = model
        window: dict[str, int] = {}

        def set_the_window() -> None:
            # Five first requests (most of one is the tool list and the brief): three logs fit under
            # the compaction share, the fourth does not, and clearing them makes room again.
            window["tokens"] = 5 * prompt_tokens(llm.requests[0].body)
            llm.context_window = settings.HERMES_CONTEXT_WINDOW = window["tokens"]

        asked = [f"Show me the log of service-{k}." for k in range(1, 5)]
        session_id, _answers = await session_run(hub, asked, first_done=set_the_window)

        session, turns, messages = await stored(session_id)
        assert not llm.rejections and model.summaries == 0
        assert session.compactions >= 1 and not [m for m in messages if m.kind == Message.Kind.SUMMARY]
        marker = f"[cleared: 6,000 chars; the ledger has it under correlation id {turns[0].id}]"
        last = request_text(llm.requests[-1].body)
        assert marker in last
        assert all(question in last for question in asked)  # every turn is still there, verbatim
        # The database keeps the result whole.
        result = next(m for m in messages if m.turn_id == turns[0].id and m.role == "user" and m.id != messages[0].id)
        assert len(result.content[0]["content"][0]["text"]) == 6000

    async def test_a_result_too_big_for_the_window_on_its_own_is_cleared_and_the_turn_still_answers(
        self, llm: FakeAnthropic, hub: ToolHub, settings: Settings
    ) -> None:
        model = RememberingModel(log_bytes=30_000)
        llm.responder = model

        def set_the_window() -> None:
            llm.context_window = 3 * prompt_tokens(llm.requests[0].body)

        _session, answers = await session_run(
            hub, ["Hello there.", "Show me the log of service-1."], first_done=set_the_window
        )

        assert answers[-1] == "The log has nothing alarming in it."
        assert "[cleared: " in request_text(llm.requests[-1].body)
        refused = llm.rejections
        assert len(refused) == 1 and refused[0].rejection and "prompt is too long" in refused[0].rejection.message
