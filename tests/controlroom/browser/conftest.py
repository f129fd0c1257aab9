"""Browser tests: Playwright driving the system Chromium against a live Hermes.

One Hermes (a Daphne subprocess on a migrated SQLite file), one `oikos_sim` and one scripted model
(`OperatorModel`) serve every browser test of the run; each test gets a fresh browser context
(its own cookies, so its own Django session). Skipped only where `/usr/bin/chromium` is absent.

Playwright's sync API refuses to run inside an asyncio loop; these tests are plain sync tests.
"""

from __future__ import annotations

import secrets
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from playwright.sync_api import Browser, ConsoleMessage, Page, sync_playwright

from oikos_sim.auth import DEFAULT_TOKENS
from oikos_sim.server import RunningSim, serve_in_thread
from tests.fakes import FakeAnthropic
from tests.fakes.daphne import DaphneServer, LiveDatabase
from tests.fakes.operator_models import OperatorModel
from tests.fakes.subprocesses import REPO_ROOT, clean_environ, sqlite_migrated

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]
ARTIFACTS = REPO_ROOT / "test-artifacts"
# Long enough to watch a run go from "running" to "completed" in the page.
EXECUTION_SECONDS = 1.0


@dataclass
class Stack:
    hermes: DaphneServer
    oikos: RunningSim
    model: FakeAnthropic
    database_url: str
    env: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return self.hermes.url


def hermes_env(*, database_url: str, oikos: RunningSim, model: FakeAnthropic) -> dict[str, str]:
    env = {
        **clean_environ(),
        **model.env(),
        "DATABASE_URL": database_url,
        "OIKOS_MCP_URL": oikos.mcp_url,
        "OIKOS_MCP_TOKEN": DEFAULT_TOKENS["agent:hermes"],
        "OIKOS_API_URL": oikos.api_url,
        "OIKOS_API_TOKEN": DEFAULT_TOKENS["service:hermes-controlroom"],
        "HERMES_LOCAL_OPERATOR": "operator",
        "HERMES_LOG_LEVEL": "INFO",
        # A second model to pick in the composer's selector.
        "HERMES_MODELS": "claude-opus-5",
        # With Redis configured (CI), the live server runs on the Redis layer; a prefix of its own
        # keeps parallel runs apart.
        "HERMES_CHANNEL_PREFIX": f"hermes-e2e-{secrets.token_hex(4)}",
    }
    return env


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    if not CHROMIUM.exists():
        pytest.skip("browser tests need Debian's chromium at /usr/bin/chromium")
    directory = tmp_path_factory.mktemp("browser")
    database_url = sqlite_migrated(directory / "hermes.sqlite3")
    with serve_in_thread(execution_seconds=EXECUTION_SECONDS) as oikos, FakeAnthropic() as model:
        model.responder = OperatorModel()
        env = hermes_env(database_url=database_url, oikos=oikos, model=model)
        log = directory / "daphne.log"
        with DaphneServer(database=LiveDatabase(database_url), env=env, log_path=log) as hermes:
            yield Stack(hermes=hermes, oikos=oikos, model=model, database_url=database_url, env=env)


@pytest.fixture(scope="module")
def browser(stack: Stack) -> Iterator[Browser]:
    # Per module, not per run: Playwright's sync API keeps an event loop running in this thread,
    # which async tests collected after these would trip over.
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@dataclass
class Watched:
    """A page and what it reported: console errors and uncaught exceptions."""

    page: Page
    errors: list[str] = field(default_factory=list)

    def assert_clean(self) -> None:
        assert not self.errors, "the page reported errors:\n" + "\n".join(self.errors)


def watch(page: Page) -> Watched:
    watched = Watched(page)

    def on_console(message: ConsoleMessage) -> None:
        if message.type == "error":
            watched.errors.append(f"console: {message.text}")

    page.on("console", on_console)
    page.on("pageerror", lambda error: watched.errors.append(f"pageerror: {error}"))
    return watched


@pytest.fixture
def page(browser: Browser, stack: Stack, request: pytest.FixtureRequest) -> Iterator[Watched]:
    # Dark first: the control room is designed for a dark room (it follows a light OS setting too).
    context = browser.new_context(viewport={"width": 1280, "height": 860}, base_url=stack.url, color_scheme="dark")
    context.set_default_timeout(10_000)
    watched = watch(context.new_page())
    yield watched
    context.close()
    if request.node.rep_call.failed if hasattr(request.node, "rep_call") else False:
        print("Hermes log:\n" + "\n".join(stack.hermes.log().splitlines()[-60:]))


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    setattr(item, f"rep_{report.when}", report)
    return report
