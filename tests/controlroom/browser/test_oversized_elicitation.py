"""A hostile MCP server sends a form of about 6.5 MB: the turn gets a clear decline, and every open
control room keeps its one websocket — no reconnect loop — with the rail and the transcript live."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, WebSocket, expect

from oikos_sim.auth import DEFAULT_TOKENS
from tests.controlroom.browser.conftest import ARTIFACTS, Stack, Watched, hermes_env, watch
from tests.controlroom.browser.steps import SESSION_URL, ask, last_turn, wait_done
from tests.fakes import FakeAnthropic, Reply
from tests.fakes.daphne import DaphneServer, LiveDatabase
from tests.fakes.mcp_fixtures import http_server_entry
from tests.fakes.mcp_hostile import HOSTILE_FORM_CHARS, build_hostile_asking_server
from tests.fakes.mcp_servers import MCPTestServer
from tests.fakes.subprocesses import sqlite_migrated

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def flooded(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """A Hermes of its own whose MCP servers are the shared Oikos and the hostile "flooder"."""
    directory = tmp_path_factory.mktemp("browser-flooder")
    database_url = sqlite_migrated(directory / "hermes.sqlite3")
    with FakeAnthropic() as model, MCPTestServer(build=build_hostile_asking_server) as flooder:
        oikos = {
            "type": "http",
            "url": stack.oikos.mcp_url,
            "headers": {"Authorization": f"Bearer {DEFAULT_TOKENS['agent:hermes']}"},
        }
        config = directory / "mcp.json"
        config.write_text(
            json.dumps({"mcpServers": {"oikos": oikos, "flooder": http_server_entry(flooder, timeout=120)}})
        )
        env = hermes_env(database_url=database_url, oikos=stack.oikos, model=model) | {"HERMES_MCP_CONFIG": str(config)}
        with DaphneServer(database=LiveDatabase(database_url), env=env, log_path=directory / "daphne.log") as hermes:
            yield Stack(hermes=hermes, oikos=stack.oikos, model=model, database_url=database_url, env=env)


class Sockets:
    """Every websocket a page opens, and whether each is still open."""

    def __init__(self, page: Page) -> None:
        self.opened: list[WebSocket] = []
        page.on("websocket", self._opened)

    def _opened(self, socket: WebSocket) -> None:
        self.opened.append(socket)

    @property
    def open(self) -> list[WebSocket]:
        return [socket for socket in self.opened if not socket.is_closed()]


def following(watched: Watched, path: str) -> Sockets:
    """Open `path` and wait for its socket's snapshot."""
    sockets = Sockets(watched.page)
    with watched.page.expect_websocket() as socket:
        watched.page.goto(path)
    socket.value.wait_for_event("framereceived")
    return sockets


@pytest.fixture
def pages(browser: Browser, flooded: Stack) -> Iterator[tuple[Watched, Watched]]:
    context = browser.new_context(viewport={"width": 1280, "height": 900}, base_url=flooded.url, color_scheme="dark")
    context.set_default_timeout(15_000)
    yield watch(context.new_page()), watch(context.new_page())
    context.close()


def test_a_six_megabyte_form_is_declined_and_the_control_room_stays_live(
    pages: tuple[Watched, Watched], flooded: Stack
) -> None:
    asker, onlooker = pages
    assert HOSTILE_FORM_CHARS > 6_000_000
    # A second control room, on the home page with the rail, open before the form is sent.
    watching = following(onlooker, "/ui/")
    flooded.model.enqueue(
        Reply.tool_use("mcp__flooder__deploy", {"service": "gitea"}), Reply.text("The deploy form was declined.")
    )
    page = asker.page
    asking = following(asker, "/ui/")

    ask(page, "deploy gitea")

    expect(page).to_have_url(SESSION_URL)
    turn = last_turn(page)
    card = turn.locator(".card.elicitation")
    expect(card).to_have_attribute("data-status", "decline")
    expect(card.locator(".elicitation-message")).to_contain_text("flooder sent a form too large to show")
    expect(card.locator(".card-reason")).to_contain_text("the form is too large: its message is 4,000,000 characters")
    wait_done(turn)
    chip = turn.locator("details.chip")
    chip.locator("summary").click()
    expect(chip.locator(".chip-result")).to_contain_text("deploy gitea: decline")
    expect(turn.locator(".text.md")).to_contain_text("The deploy form was declined.")

    # The onlooker's rail never showed the form, and its socket hears what happens next: the new
    # session reaches its list live.
    expect(onlooker.page.locator("#elicitations")).to_contain_text("No tool is asking anything.")
    expect(onlooker.page.locator("#session-list")).to_contain_text("deploy gitea")

    # The asker's transcript is still live: the next answer arrives over the same socket.
    flooded.model.enqueue(Reply.text("Caddy is fine."))
    ask(page, "and caddy?")
    expect(last_turn(page).locator(".text.md")).to_contain_text("Caddy is fine.")
    page.screenshot(path=str(ARTIFACTS / "oversized-elicitation.png"), full_page=True)

    # One socket each, all along: none dropped, none reopened.
    assert len(watching.opened) == 1 and len(watching.open) == 1
    assert len(asking.open) == 1, [socket.url for socket in asking.opened]
    assert len(page.locator(".transcript .card.elicitation").all_inner_texts()[0]) < 1_000
    asker.assert_clean()
    onlooker.assert_clean()
