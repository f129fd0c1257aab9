"""The HTTP API under access control: who a turn is recorded for, who may read sessions, what a
browser on another site can do, and what oversized or malformed input leaves behind (nothing)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest
from django.contrib.auth.models import User
from pytest_django.fixtures import Settings

from agent.models import Activity, AgentSession, Message, Turn
from agent.tools import tool_hub_close
from tests.fakes import FakeAnthropic, Reply
from tests.fakes.mcp_servers import MCPTestServer
from tests.security.asgi_client import MESH_PEER, TRUSTED_PROXY, Headers, Response, http, proxy_headers

pytestmark = pytest.mark.django_db(transaction=True)

JSON = ("content-type", "application/json")


@pytest.fixture
async def hermes_api(llm: FakeAnthropic, mcp_oikos_settings: MCPTestServer) -> AsyncIterator[FakeAnthropic]:
    """The scripted model and the mini Oikos behind the API; the tool hub closed afterwards."""
    yield llm
    await tool_hub_close()


async def _stored() -> dict[str, int]:
    return {
        "sessions": await AgentSession.objects.acount(),
        "turns": await Turn.objects.acount(),
        "messages": await Message.objects.acount(),
        "activity": await Activity.objects.acount(),
    }


NOTHING = {"sessions": 0, "turns": 0, "messages": 0, "activity": 0}


def _done(response: Response) -> dict:
    """The `done` event of a `/chat` stream."""
    for line in response.text.splitlines():
        if line.startswith("data: ") and '"type":"done"' in line:
            return json.loads(line.removeprefix("data: "))
    raise AssertionError(f"no done event in {response.text!r}")


async def _chat(message: str, *, peer: str = "127.0.0.1", headers: Headers = ()) -> Response:
    body = json.dumps({"message": message}).encode()
    return await http("/chat", method="POST", body=body, headers=[JSON, *headers], peer=peer)


class TestOperatorsAndSessions:
    async def test_a_turn_is_recorded_for_the_operator_the_proxy_names(
        self, hermes_api: FakeAnthropic, proxy_mode: Settings
    ) -> None:
        hermes_api.enqueue(Reply.text("Noted."))

        response = await _chat("hello", peer=TRUSTED_PROXY, headers=proxy_headers("alice"))

        assert response.status == 200
        session = await AgentSession.objects.aget(pk=_done(response)["session_id"])
        assert session.actor == "operator:alice"
        assert await Turn.objects.filter(session=session, actor="operator:alice").aexists()

    async def test_every_operator_sees_every_session(self, hermes_api: FakeAnthropic, proxy_mode: Settings) -> None:
        hermes_api.enqueue(Reply.text("Noted."))
        session_id = _done(await _chat("hello", peer=TRUSTED_PROXY, headers=proxy_headers("alice")))["session_id"]

        listed = await http("/sessions", peer=TRUSTED_PROXY, headers=proxy_headers("bob"))
        detail = await http(f"/sessions/{session_id}", peer=TRUSTED_PROXY, headers=proxy_headers("bob"))

        assert [session["id"] for session in listed.json()["sessions"]] == [session_id]
        assert detail.status == 200 and detail.json()["actor"] == "operator:alice"

    async def test_nothing_is_visible_anonymously_outside_local_mode(
        self, hermes_api: FakeAnthropic, django_mode: Settings
    ) -> None:
        await AgentSession.objects.acreate(title="private", actor="operator:alice", origin="api")

        for path in ("/sessions", "/openapi.json"):
            response = await http(path)
            assert response.status == 403
            assert b"private" not in response.body

    async def test_a_signed_in_user_is_an_operator(self, hermes_api: FakeAnthropic, django_mode: Settings) -> None:
        await User.objects.acreate_user("ines", password="a long passphrase")
        hermes_api.enqueue(Reply.text("Noted."))
        cookie = await _sign_in("ines", "a long passphrase")

        response = await _chat("hello", headers=[cookie])

        assert response.status == 200
        assert (await AgentSession.objects.aget(pk=_done(response)["session_id"])).actor == "operator:ines"


async def _sign_in(username: str, password: str) -> tuple[str, str]:
    form = await http("/accounts/login/")
    token = form.text.split('name="csrfmiddlewaretoken" value="', 1)[1].split('"', 1)[0]
    signed_in = await http(
        "/accounts/login/",
        method="POST",
        headers=[form.cookie_header(), ("content-type", "application/x-www-form-urlencoded")],
        body=f"csrfmiddlewaretoken={token}&username={username}&password={password.replace(' ', '+')}".encode(),
    )
    assert signed_in.status == 302
    cookies = {**form.set_cookies, **signed_in.set_cookies}
    return ("cookie", "; ".join(f"{name}={value}" for name, value in cookies.items()))


class TestCrossSiteRequests:
    """A page on another site can make the browser POST a form or a `text/plain` body with the
    operator's cookies, without a CORS preflight. The API takes only `application/json`, which no
    such request can carry, so nothing starts."""

    @pytest.mark.parametrize("path", ["/chat", "/query"])
    @pytest.mark.parametrize(
        "content_type", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"]
    )
    async def test_a_cross_site_post_with_the_operator_s_cookies_starts_nothing(
        self, hermes_api: FakeAnthropic, django_mode: Settings, path: str, content_type: str
    ) -> None:
        await User.objects.acreate_user("ines", password="a long passphrase")
        cookie = await _sign_in("ines", "a long passphrase")

        response = await http(
            path,
            method="POST",
            headers=[cookie, ("content-type", content_type), ("origin", "https://evil.example")],
            body=b'{"message": "deploy jellyfin", "tool": "get_health_summary"}',
        )

        assert response.status == 415
        assert await _stored() == NOTHING
        assert not hermes_api.requests


class TestInputLimits:
    async def test_an_oversized_message_is_refused_and_nothing_is_stored(
        self, hermes_api: FakeAnthropic, settings: Settings
    ) -> None:
        settings.HERMES_MAX_MESSAGE_CHARS = 1000

        response = await _chat("a" * 1001, peer=MESH_PEER)

        assert response.status == 413
        assert response.json()["error"]["code"] == "message_too_large"
        assert await _stored() == NOTHING
        assert not hermes_api.requests

    async def test_an_oversized_body_is_refused_at_the_edge(
        self, hermes_api: FakeAnthropic, settings: Settings
    ) -> None:
        settings.HERMES_MAX_REQUEST_BYTES = 8192
        settings.HERMES_A2A_MAX_BODY_BYTES = 8192

        response = await _chat("a" * 10_000)

        assert response.status == 413
        assert response.json()["error"]["code"] == "request_too_large"
        assert await _stored() == NOTHING

    @pytest.mark.parametrize("path", ["/chat", "/query"])
    async def test_deeply_nested_json_is_refused_and_nothing_is_stored(
        self, hermes_api: FakeAnthropic, path: str
    ) -> None:
        nested = b'{"message": ' + b"[" * 5000 + b"]" * 5000 + b"}"

        response = await http(path, method="POST", headers=[JSON], body=nested)

        assert response.status == 400
        assert response.json()["error"]["code"] == "json_too_deep"
        assert await _stored() == NOTHING
