"""Two Hermes processes on one Redis channel layer: a turn is followed and stopped from either."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, expect

from tests.controlroom.browser.conftest import Stack, watch
from tests.controlroom.browser.steps import SESSION_URL, ask, last_turn
from tests.fakes.daphne import DaphneServer
from tests.fakes.operator_models import STOPPABLE_ANSWER

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def second_process(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaphneServer]:
    if not os.environ.get("REDIS_URL"):
        pytest.skip("two processes share turns only through Redis; REDIS_URL is not set (CI sets it)")
    log = tmp_path_factory.mktemp("second-process") / "daphne.log"
    with DaphneServer(database=stack.hermes.database, env=stack.env, log_path=log) as hermes:
        yield hermes


def test_a_turn_running_in_one_process_is_followed_and_stopped_from_another(
    browser: Browser, stack: Stack, second_process: DaphneServer
) -> None:
    first = watch(browser.new_context(base_url=stack.url, color_scheme="dark").new_page())
    first.page.goto("/ui/")
    ask(first.page, "a long report for two processes, to stop")
    expect(first.page).to_have_url(SESSION_URL)
    expect(last_turn(first.page).locator(".text.streaming")).to_contain_text("Line 2:")
    path = first.page.url.removeprefix(stack.url)

    second = watch(browser.new_context(base_url=second_process.url, color_scheme="dark").new_page())
    second.page.goto(path)
    turn = last_turn(second.page)
    # The turn so far comes from the process that runs it; the rest streams in live.
    expect(turn.locator(".text.streaming")).to_contain_text("Line 4:")
    second.page.locator("#turn-controls").get_by_role("button", name="Stop").click()

    for page in (first, second):
        finished = last_turn(page.page)
        expect(finished.locator(".turn-foot .status")).to_have_text("cancelled")
        partial = finished.locator(".text.md").inner_text().strip()
        assert STOPPABLE_ANSWER.startswith(partial) and len(partial) < len(STOPPABLE_ANSWER)
        page.assert_clean()
        page.page.context.close()
