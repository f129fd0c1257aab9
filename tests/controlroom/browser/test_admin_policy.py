"""The admin works under Hermes's Content-Security-Policy: Chromium blocks none of its styles."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.controlroom.browser.conftest import Watched
from tests.controlroom.browser.steps import ask, last_turn, wait_done

pytestmark = pytest.mark.e2e

# Every page the browser reports a violation on is collected here by the page itself.
VIOLATIONS_WATCH = """
window.__violations = [];
document.addEventListener("securitypolicyviolation", (event) => {
  window.__violations.push(`${event.violatedDirective} ${event.blockedURI || "inline"} ${event.sourceFile}`);
});
"""

ADMIN_LISTS = [
    "/admin/",
    "/admin/agent/agentsession/",
    "/admin/agent/activity/",
    "/admin/oikos/approvaldecision/",
    "/admin/interop/a2atask/",
    "/admin/auth/user/",
]


def test_admin_pages_load_with_no_style_or_script_blocked(page: Watched) -> None:
    browser_page = page.page
    browser_page.add_init_script(VIOLATIONS_WATCH)
    # A session with text, a tool call and its result, for the transcript the admin renders.
    browser_page.goto("/ui/")
    ask(browser_page, "what is degraded?")
    wait_done(last_turn(browser_page))

    visited: dict[str, list[str]] = {}
    for path in ADMIN_LISTS:
        response = browser_page.goto(path)
        assert response is not None and response.status == 200, path
        visited[path] = browser_page.evaluate("window.__violations")
    for changelist in ("/admin/agent/agentsession/", "/admin/agent/activity/", "/admin/auth/user/"):
        browser_page.goto(changelist)
        browser_page.locator("#result_list tbody tr th a").first.click()
        expect(browser_page.locator("#content-main")).to_be_visible()
        visited[f"a change page from {changelist}"] = browser_page.evaluate("window.__violations")
    browser_page.goto("/admin/agent/agentsession/")
    browser_page.locator("#result_list tbody tr th a").first.click()

    assert not any(visited.values()), visited
    # Hermes's admin stylesheet applies (transcripts wrap instead of running on as one long line).
    assert browser_page.locator(".hermes-block").first.evaluate("e => getComputedStyle(e).whiteSpace") == "pre-wrap"
    # Nothing else went wrong either (the admin has no favicon: the browser's request for one is a 404).
    problems = [error for error in page.errors if "status of 404" not in error]
    assert not problems, problems
