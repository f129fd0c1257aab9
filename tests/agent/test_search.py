"""Search over every session: questions, answers, tool arguments and results, through real turns.

Sessions are made by real turns (the scripted model calling the mini Oikos over MCP), so the index
is the one the write path keeps. Runs on SQLite (FTS5) by default and on PostgreSQL (tsvector + GIN)
with DATABASE_URL set.
"""

from __future__ import annotations

import datetime
import re
import uuid

import pytest
from channels.db import database_sync_to_async
from django.core.management import call_command
from django.db import connection
from django.test import Client
from django.utils import timezone
from pytest_django.fixtures import Settings

from agent.models import SearchEntry
from agent.search.query import SearchFilters, fts5_query, search_run, snippet_html
from agent.tools import ToolHub
from tests.agent.conftest import ask
from tests.fakes import FakeAnthropic, Reply

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "pg-archive-password-7Hq2Zx"


async def _fleet_session(llm: FakeAnthropic, hub: ToolHub) -> uuid.UUID:
    """An older session whose only mention of "degraded" is inside a tool result."""
    llm.enqueue(Reply.tool_use("mcp__oikos__get_health_summary", {}), Reply.text("One service needs attention."))
    handle, _ = await ask("how is the fleet doing?", hub)
    return handle.session_id


async def _caddy_session(llm: FakeAnthropic, hub: ToolHub) -> uuid.UUID:
    llm.enqueue(Reply.tool_use("mcp__oikos__get_entity", {"slug": "service:caddy"}), Reply.text("Caddy is fine."))
    handle, _ = await ask("is caddy responding?", hub)
    return handle.session_id


search = database_sync_to_async(search_run)


class TestFinding:
    async def test_a_term_only_inside_an_older_sessions_tool_result_is_found(
        self, llm: FakeAnthropic, hub: ToolHub
    ) -> None:
        older = await _fleet_session(llm, hub)
        await _caddy_session(llm, hub)

        hits = await search(SearchFilters(query="degraded"))

        assert [(hit.session_id, hit.kind, hit.tool) for hit in hits] == [(older, "tool", "get_health_summary")]
        assert "<mark>degraded</mark>" in str(hits[0].snippet_html)
        # The newer session's answer, arguments and result are found by their own words.
        assert {hit.kind for hit in await search(SearchFilters(query="caddy"))} == {"question", "answer", "tool"}

    async def test_questions_answers_and_tool_arguments_are_each_found(self, llm: FakeAnthropic, hub: ToolHub) -> None:
        await _caddy_session(llm, hub)
        assert [hit.kind for hit in await search(SearchFilters(query="responding"))] == ["question"]
        assert [hit.kind for hit in await search(SearchFilters(query="fine"))] == ["answer"]
        [argument] = await search(SearchFilters(query="service:caddy", tool="get_entity"))
        assert argument.kind == "tool" and argument.turn_id is not None

    async def test_filters_narrow_by_tool_actor_origin_and_date(self, llm: FakeAnthropic, hub: ToolHub) -> None:
        await _caddy_session(llm, hub)
        assert await search(SearchFilters(query="caddy", tool="get_health_summary")) == []
        assert len(await search(SearchFilters(query="caddy", actor="operator:test", origin="cli"))) == 3
        assert await search(SearchFilters(query="caddy", actor="operator:someone-else")) == []
        tomorrow = timezone.now() + datetime.timedelta(days=1)
        assert await search(SearchFilters(query="caddy", since=tomorrow)) == []
        assert len(await search(SearchFilters(query="caddy", until=tomorrow))) == 3


class TestSecrets:
    async def test_a_configured_secret_pasted_into_a_question_is_never_found_nor_indexed(
        self, llm: FakeAnthropic, hub: ToolHub, settings: Settings, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("WAL_ARCHIVE_PASSWORD", SECRET)
        settings.HERMES_REDACT = ["WAL_ARCHIVE_PASSWORD"]
        llm.enqueue(Reply.text("Please never paste passwords here."))
        await ask(f"wal archiving fails, the password is {SECRET} right?", hub)

        assert await search(SearchFilters(query=SECRET)) == []
        assert [hit.kind for hit in await search(SearchFilters(query="archiving password"))] == ["question"]
        stored = await database_sync_to_async(_index_contents)()
        assert stored and not any(SECRET in text for text in stored)
        assert any("[REDACTED]" in text for text in stored)


def _index_contents() -> list[str]:
    """Everything the index holds, read from the database itself (and FTS5's own copy on SQLite)."""
    texts = list(SearchEntry.objects.values_list("text", flat=True))
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("SELECT text FROM agent_search_fts")
        else:
            cursor.execute("SELECT document::text FROM agent_search_entries")
        texts += [row[0] for row in cursor.fetchall()]
    return texts


class TestReindex:
    async def test_search_reindex_rebuilds_the_index_from_the_stored_rows(
        self, llm: FakeAnthropic, hub: ToolHub
    ) -> None:
        await _fleet_session(llm, hub)
        before = await database_sync_to_async(_entries)()
        await database_sync_to_async(SearchEntry.objects.all().delete)()
        assert await search(SearchFilters(query="degraded")) == []

        await database_sync_to_async(call_command)("search_reindex", verbosity=0)

        assert await database_sync_to_async(_entries)() == before
        assert len(await search(SearchFilters(query="degraded"))) == 1


def _entries() -> list[tuple[str, str, str]]:
    return sorted(SearchEntry.objects.values_list("kind", "tool", "text"))


class TestQuerySyntax:
    def test_anything_an_operator_types_becomes_quoted_fts5_terms(self) -> None:
        assert fts5_query('wal "archive command" -caddy') == '"wal" "archive command" NOT "caddy"'
        assert fts5_query('NEAR( * ^ ") OR') == '"NEAR" "OR"'
        assert fts5_query("-only -negated") == ""
        assert fts5_query("***") == ""

    def test_the_snippet_escapes_content_and_only_our_markers_become_highlights(self) -> None:
        html = str(snippet_html('<script>x</script> \x02match\x03 <mark>fake</mark> "q" \x02cut'))
        assert html == (
            "&lt;script&gt;x&lt;/script&gt; <mark>match</mark> &lt;mark&gt;fake&lt;/mark&gt; &quot;q&quot; "
            "<mark>cut</mark>"
        )


class TestApi:
    async def test_get_search_answers_ranked_hits_with_links_to_the_turn(
        self, llm: FakeAnthropic, hub: ToolHub
    ) -> None:
        older = await _fleet_session(llm, hub)

        response = await database_sync_to_async(Client().get)("/search", {"q": "degraded"})

        assert response.status_code == 200
        body = response.json()
        assert body["query"] == "degraded" and body["count"] == 1
        [hit] = body["results"]
        assert hit["session_id"] == str(older) and hit["kind"] == "tool" and hit["tool"] == "get_health_summary"
        assert "<mark>degraded</mark>" in hit["snippet_html"] and "degraded" in hit["snippet"]
        assert hit["url"].startswith(f"/ui/s/{older}/#chip-{hit['turn_id']}-")

    def test_bad_parameters_are_clear_400s(self, client: Client) -> None:
        assert client.get("/search").json()["error"]["code"] == "missing_query"
        assert client.get("/search", {"q": "x", "since": "yesterday"}).json()["error"]["code"] == "invalid_parameter"
        assert client.get("/search", {"q": "x", "limit": "1000"}).status_code == 400
        assert client.get("/search", {"q": "x" * 201}).status_code == 400


class TestControlRoom:
    async def test_the_nav_search_box_leads_to_ranked_hits_linking_to_the_turn(
        self, llm: FakeAnthropic, hub: ToolHub
    ) -> None:
        older = await _fleet_session(llm, hub)
        llm.enqueue(Reply.text("Looks like <script>alert(1)</script> degraded markup."))
        await ask("render something odd", hub)
        get = database_sync_to_async(Client().get)

        home = (await get("/ui/")).content.decode()
        assert 'action="/ui/search/"' in home and 'name="q"' in home

        html = (await get("/ui/search/", {"q": "degraded"})).content.decode()

        assert "2 results" in html
        # The hit links to its chip, carrying the words it matched (`?hl=`) to mark there.
        assert re.search(rf'href="/ui/s/{older}/\?hl=[^"#]*degraded[^"#]*#chip-', html)
        assert "<mark>degraded</mark>" in html
        # Content is text, never markup: the answer's tags arrive escaped (SQLite) or left out of
        # the snippet by PostgreSQL's parser, which reads them as tags.
        assert "<script>alert" not in html and "alert(1)" in html

    def test_filters_that_do_not_parse_are_said_so(self, client: Client) -> None:
        html = client.get("/ui/search/", {"q": "x", "since": "last tuesday"}).content.decode()
        assert 'role="alert"' in html and "since" in html
