"""A real Synapse, real Matrix clients for the people in the room, and the bridge under test.

`homeserver` starts once per run (tests/matrix/homeserver.py). Each test gets a `room`: fresh users
(the bot, operator alice, stranger mallory), a room alice created with both invited, and nio clients
for alice and mallory. `bridge_start()` runs a `MatrixBridge` in the test's event loop on the test's
oikos_sim and scripted model; it is stopped after the test.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx2
import pytest
from nio import AsyncClient, MessageDirection, RoomCreateResponse, RoomMessagesResponse, RoomSendResponse
from pytest_django.fixtures import Settings

from agent.tools import ToolHub
from matrix.bridge import MatrixBridge
from matrix.config import MatrixSettings
from tests.matrix.homeserver import Homeserver, MatrixUser

WAIT_SECONDS = 30.0


@pytest.fixture(scope="session")
def homeserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Homeserver]:
    server = Homeserver(tmp_path_factory.mktemp("synapse"))
    server.start()
    yield server
    server.stop()


@dataclass
class Person:
    user: MatrixUser
    client: AsyncClient

    async def send(self, room_id: str, body: str, *, thread: str | None = None, mention: str | None = None) -> str:
        content: dict[str, Any] = {"msgtype": "m.text", "body": body}
        if mention:
            content["m.mentions"] = {"user_ids": [mention]}
        if thread:
            content["m.relates_to"] = {"rel_type": "m.thread", "event_id": thread, "is_falling_back": True}
        response = await self.client.room_send(room_id, "m.room.message", content)
        assert isinstance(response, RoomSendResponse), response
        return str(response.event_id)

    async def react(self, room_id: str, event_id: str, key: str) -> str:
        content = {"m.relates_to": {"rel_type": "m.annotation", "event_id": event_id, "key": key}}
        response = await self.client.room_send(room_id, "m.reaction", content)
        assert isinstance(response, RoomSendResponse), response
        return str(response.event_id)


@dataclass
class Posted:
    """A message as a reader sees it now: its latest edit applied, and how many edits it had."""

    event_id: str
    sender: str
    content: dict[str, Any]
    thread: str | None
    edits: int = 0

    @property
    def body(self) -> str:
        return str(self.content.get("body", ""))


@dataclass
class Room:
    room_id: str
    bot: MatrixUser
    alice: Person
    mallory: Person
    homeserver: Homeserver
    pytest_config: pytest.Config

    async def messages(self) -> list[Posted]:
        """Every message of the room, oldest first, with edits applied (as a client renders them)."""
        events = await self.events()
        posted: dict[str, Posted] = {}
        for event in events:
            if event.get("type") != "m.room.message":
                continue
            content = event.get("content") or {}
            relation = content.get("m.relates_to") or {}
            if relation.get("rel_type") == "m.replace" and relation.get("event_id") in posted:
                original = posted[relation["event_id"]]
                original.content = content["m.new_content"]
                original.edits += 1
                continue
            thread = relation.get("event_id") if relation.get("rel_type") == "m.thread" else None
            posted[event["event_id"]] = Posted(event["event_id"], event["sender"], dict(content), thread)
        return list(posted.values())

    async def edits(self, event_id: str) -> list[str]:
        """The bodies `event_id`'s edits gave it, in the order they landed in the room."""
        return [
            str(event["content"]["m.new_content"].get("body", ""))
            for event in await self.events()
            if event.get("type") == "m.room.message"
            and (event.get("content") or {}).get("m.relates_to", {}).get("rel_type") == "m.replace"
            and event["content"]["m.relates_to"].get("event_id") == event_id
        ]

    async def events(self) -> list[dict[str, Any]]:
        """Every event of the room, oldest first."""
        events: list[dict[str, Any]] = []
        start: str | None = None
        while True:
            response = await self.alice.client.room_messages(
                self.room_id, start=start, direction=MessageDirection.back, limit=100
            )
            assert isinstance(response, RoomMessagesResponse), response
            events.extend(event.source for event in response.chunk)
            if not response.chunk or not response.end:
                break
            start = response.end
        events.reverse()
        return events

    async def notified(self, person: Person) -> list[str]:
        """The ids of the room's events the homeserver notified `person` of (stock push rules), oldest first.

        What Synapse's push rules decided, as its notifications API lists them: what a phone would ring for.
        """
        response = await asyncio.to_thread(
            httpx2.get,
            f"{self.homeserver.url}/_matrix/client/v3/notifications",
            params={"limit": 100},
            headers={"Authorization": f"Bearer {person.user.access_token}"},
            timeout=10,
        )
        response.raise_for_status()
        rows = [n for n in response.json()["notifications"] if n.get("room_id") == self.room_id]
        return [str(n["event"]["event_id"]) for n in reversed(rows)]

    async def show(self, title: str) -> None:
        """Print the room as a phone shows it (edits applied) in the test run's output, captured or not."""
        lines = [f"--- {title} ---"]
        for message in await self.messages():
            lines += [f"[{message.sender}] ({message.edits} edits)", message.body, ""]
        capture = self.pytest_config.pluginmanager.getplugin("capturemanager")
        if capture is None:
            print("\n".join(lines))
            return
        with capture.global_and_fixture_disabled():  # what `capsys.disabled()` does
            print("\n" + "\n".join(lines), flush=True)

    async def from_bot(self) -> list[Posted]:
        return [message for message in await self.messages() if message.sender == self.bot.user_id]

    async def wait_for(
        self, check: Callable[[list[Posted]], bool], what: str, *, within: float = WAIT_SECONDS
    ) -> list[Posted]:
        """The bot's messages once `check` holds for them (a deadline only for failing, never for timing)."""
        deadline = time.monotonic() + within
        while True:
            messages = await self.from_bot()
            if check(messages):
                return messages
            if time.monotonic() > deadline:
                raise AssertionError(f"never saw {what}; the bot posted: {[m.body for m in messages]}")
            await asyncio.sleep(0.2)


async def _person(homeserver: Homeserver, name: str) -> Person:
    user = await asyncio.to_thread(homeserver.register, f"{name}-{secrets.token_hex(4)}")
    client = AsyncClient(homeserver.url, user.user_id)
    client.access_token = user.access_token
    client.user_id = user.user_id
    return Person(user, client)


async def room_create(homeserver: Homeserver, owner: Person, invite: list[str]) -> str:
    response = await owner.client.room_create(name="ops", invite=invite)
    assert isinstance(response, RoomCreateResponse), response
    return str(response.room_id)


@pytest.fixture
async def room(homeserver: Homeserver, settings: Settings, pytestconfig: pytest.Config) -> AsyncIterator[Room]:
    bot = await asyncio.to_thread(homeserver.register, f"hermes-{secrets.token_hex(4)}")
    alice = await _person(homeserver, "alice")
    mallory = await _person(homeserver, "mallory")
    room_id = await room_create(homeserver, alice, [bot.user_id, mallory.user.user_id])
    await mallory.client.join(room_id)
    settings.HERMES_MATRIX_HOMESERVER = homeserver.url
    settings.HERMES_MATRIX_USER_ID = bot.user_id
    settings.HERMES_MATRIX_ACCESS_TOKEN = bot.access_token
    settings.HERMES_MATRIX_ROOMS = [room_id]
    settings.HERMES_MATRIX_OPERATORS = f"{alice.user.user_id}=alice"
    settings.HERMES_MATRIX_EDIT_SECONDS = 0.2
    yield Room(
        room_id=room_id, bot=bot, alice=alice, mallory=mallory, homeserver=homeserver, pytest_config=pytestconfig
    )
    await alice.client.close()
    await mallory.client.close()


@dataclass
class RunningBridge:
    bridge: MatrixBridge
    task: asyncio.Task[None]

    async def stop(self) -> None:
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)
        await self.bridge.aclose()


@pytest.fixture
async def bridge_start(oikos_hub: ToolHub) -> AsyncIterator[Callable[[], Any]]:
    """`await bridge_start()`: a bridge on the test's settings, synced once; stopped after the test."""
    running: list[RunningBridge] = []

    async def start(**options: Any) -> RunningBridge:
        bridge = MatrixBridge(config=MatrixSettings.from_settings(), hub=oikos_hub, **options)
        task = asyncio.get_running_loop().create_task(bridge.run())
        await asyncio.wait_for(bridge.ready.wait(), WAIT_SECONDS)
        await asyncio.wait_for(bridge.cards.connected.wait(), WAIT_SECONDS)
        handle = RunningBridge(bridge, task)
        running.append(handle)
        return handle

    yield start
    for handle in running:
        await handle.stop()
