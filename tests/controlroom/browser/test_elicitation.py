"""An MCP server asks the operator for details mid-call: the form in the rail, the card in the
conversation, the answer reaching the server — and a question that survives a reload."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Dialog, expect

from oikos_sim.auth import DEFAULT_TOKENS
from tests.controlroom.browser.conftest import ARTIFACTS, Stack, Watched, hermes_env, watch
from tests.controlroom.browser.steps import SESSION_URL, ask, last_turn, wait_done
from tests.fakes import FakeAnthropic, Reply
from tests.fakes.daphne import DaphneServer, LiveDatabase
from tests.fakes.mcp_fixtures import http_server_entry
from tests.fakes.mcp_servers import MCPTestServer, build_asking_server
from tests.fakes.subprocesses import sqlite_migrated

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def asking(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """A Hermes of its own whose MCP servers are the shared Oikos and a server that asks questions."""
    directory = tmp_path_factory.mktemp("browser-elicit")
    database_url = sqlite_migrated(directory / "hermes.sqlite3")
    with FakeAnthropic() as model, MCPTestServer(build=build_asking_server) as deployer:
        oikos = {
            "type": "http",
            "url": stack.oikos.mcp_url,
            "headers": {"Authorization": f"Bearer {DEFAULT_TOKENS['agent:hermes']}"},
        }
        config = Path(directory / "mcp.json")
        config.write_text(
            json.dumps({"mcpServers": {"oikos": oikos, "deployer": http_server_entry(deployer, timeout=120)}})
        )
        env = hermes_env(database_url=database_url, oikos=stack.oikos, model=model) | {"HERMES_MCP_CONFIG": str(config)}
        log = directory / "daphne.log"
        with DaphneServer(database=LiveDatabase(database_url), env=env, log_path=log) as hermes:
            yield Stack(hermes=hermes, oikos=stack.oikos, model=model, database_url=database_url, env=env)


@pytest.fixture
def asked(browser: Browser, asking: Stack) -> Iterator[Watched]:
    context = browser.new_context(viewport={"width": 1280, "height": 900}, base_url=asking.url, color_scheme="dark")
    context.set_default_timeout(10_000)
    watched = watch(context.new_page())
    dialogs: list[Dialog] = []

    def on_dialog(dialog: Dialog) -> None:
        dialogs.append(dialog)
        dialog.dismiss()

    watched.page.on("dialog", on_dialog)
    yield watched
    context.close()
    assert not dialogs, "text from the MCP server ran as script"


def deploy_script(model: FakeAnthropic, service: str, then: str) -> None:
    model.enqueue(Reply.tool_use("mcp__deployer__deploy", {"service": service}), Reply.text(then))


def test_the_operator_answers_the_form_and_the_server_gets_the_answer(asked: Watched, asking: Stack) -> None:
    page = asked.page
    page.goto("/ui/")
    deploy_script(asking.model, "jellyfin", "Deployed jellyfin to production.")

    ask(page, "deploy jellyfin")

    expect(page).to_have_url(SESSION_URL)
    turn = last_turn(page)
    inline = turn.locator(".card.elicitation")
    card = page.locator("#elicitations .card.elicitation")
    expect(inline).to_have_attribute("data-status", "pending")
    expect(inline.locator(".card-stage")).to_contain_text("the form is in the rail")
    expect(card).to_be_visible()
    # The server's words are shown as text, markup and all; nothing of it runs.
    expect(card.locator(".elicitation-message")).to_contain_text("<script>alert('x')</script>")
    expect(card.locator(".field-help").first).to_contain_text("<i>Shown to the on-call team.</i>")
    form = card.locator("form.elicitation-form")
    # Defaults are filled in; the required field is marked.
    expect(form.locator("select")).to_have_value("staging")
    expect(form.locator("input[type=number]")).to_have_value("1")
    expect(form.locator("input[type=checkbox]")).to_be_checked()
    expect(card.locator(".required")).to_have_count(1)

    # Accepting without the required reason is refused under the form; nothing reaches the server.
    form.get_by_role("button", name="Accept").click()
    expect(card.locator(".elicitation-errors")).to_contain_text("reason required")
    expect(inline).to_have_attribute("data-status", "pending")

    form.get_by_label("Reason").fill("release 2.1")
    form.locator("select").select_option("production")
    form.locator("input[type=number]").fill("3")
    form.locator("input[type=checkbox]").uncheck()
    page.screenshot(path=str(ARTIFACTS / "elicitation-form.png"), full_page=True)
    form.get_by_role("button", name="Accept").click()

    expect(inline).to_have_attribute("data-status", "accept")
    expect(inline.locator(".card-stage")).to_contain_text("Accepted by operator")
    expect(page.locator("#elicitations")).to_contain_text("No tool is asking anything.")
    wait_done(turn)
    chip = turn.locator("details.chip")
    chip.locator("summary").click()
    sent = {"reason": "release 2.1", "environment": "production", "replicas": 3, "notify": False}
    expect(chip.locator(".chip-result")).to_contain_text(f"accepted {json.dumps(sent, separators=(',', ':'))}")
    expect(turn.locator(".text.md")).to_contain_text("Deployed jellyfin to production.")
    page.screenshot(path=str(ARTIFACTS / "elicitation-answered.png"), full_page=True)
    asked.assert_clean()


def test_a_waiting_question_survives_a_reload_and_decline_reaches_the_server(asked: Watched, asking: Stack) -> None:
    page = asked.page
    page.goto("/ui/")
    deploy_script(asking.model, "caddy", "The deploy of caddy was declined.")

    ask(page, "deploy caddy")

    card = page.locator("#elicitations .card.elicitation")
    expect(card).to_contain_text("Deploy caddy?")
    page.reload()
    card = page.locator("#elicitations .card.elicitation")
    expect(card).to_contain_text("Deploy caddy?")
    card.get_by_role("button", name="Decline").click()

    expect(page.locator("#elicitations")).to_contain_text("No tool is asking anything.")
    turn = last_turn(page)
    wait_done(turn)
    inline = turn.locator(".card.elicitation")
    expect(inline).to_have_attribute("data-status", "decline")
    chip = turn.locator("details.chip")
    chip.locator("summary").click()
    expect(chip.locator(".chip-result")).to_contain_text("deploy caddy: decline")
    # Drawn from the database once the turn is over: the question stays beside its call.
    page.reload()
    inline = last_turn(page).locator(".card.elicitation")
    expect(inline).to_have_attribute("data-status", "decline")
    expect(inline.locator(".card-stage")).to_contain_text("Declined by operator")
    asked.assert_clean()
