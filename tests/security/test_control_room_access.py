"""The control room under access control, HTTP and websocket, through the whole ASGI application:
who the operator is, the origin and CSRF rules, and approvals decided only by a person."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest
from django.contrib.auth.models import User
from pytest_django.fixtures import Settings

from agent.live import turn_registry_close
from agent.models import AgentSession, Message, Turn
from controlroom.investigation_feed import investigation_feed_close
from oikos.models import ApprovalDecision
from oikos.relay import oikos_relay_close
from oikos_sim.server import RunningSim
from tests.fakes import FakeAnthropic, Reply
from tests.fakes.oikos_fixtures import AGENT_TOKEN
from tests.security.asgi_client import MESH_PEER, TRUSTED_PROXY, Headers, Response, http, proxy_headers, websocket

pytestmark = pytest.mark.django_db(transaction=True)

FORM = ("content-type", "application/x-www-form-urlencoded")
ALICE = proxy_headers("alice", groups="hermes-admins")


@pytest.fixture
async def control_room(oikos_settings: RunningSim, llm: FakeAnthropic) -> AsyncIterator[RunningSim]:
    """The control room on a real oikos_sim and the scripted model; its per-process parts closed after."""
    llm.responder = lambda body: Reply.text("Noted.")
    yield oikos_settings
    await turn_registry_close()
    await oikos_relay_close()
    await investigation_feed_close()


def _pending_approval(oikos: RunningSim) -> str:
    """A deploy the agent requested, parked by Oikos for an operator."""
    response = httpx2.post(
        f"{oikos.api_url}/executions",
        json={"target": "service:jellyfin", "action": "deploy"},
        headers={"Authorization": f"Bearer {AGENT_TOKEN}"},
    )
    response.raise_for_status()
    return str(response.json()["approval_id"])


async def _page(path: str, *, peer: str = "127.0.0.1", headers: Headers = ()) -> tuple[Response, str]:
    """A control room page and the CSRF token its forms and htmx requests carry."""
    page = await http(path, peer=peer, headers=headers)
    assert page.status == 200, page.text
    token = re.search(r'"X-CSRFToken": "([^"]+)"', page.text)
    assert token, "the page carries no CSRF token"
    return page, token[1]


async def _post(
    path: str, body: str, *, page: Response | None, token: str | None, peer: str = "127.0.0.1", headers: Headers = ()
) -> Response:
    sent: list[tuple[str, str | bytes]] = [FORM, *headers]
    if page is not None:
        sent.append(page.cookie_header())
    if token is not None:
        sent.append(("x-csrftoken", token))
    return await http(path, method="POST", body=body.encode(), headers=sent, peer=peer)


def _oikos_approval(oikos: RunningSim, approval_id: str) -> Any:
    return oikos.state.desk.approval_get(approval_id)


async def _the_refused_attempt(approval_id: str) -> ApprovalDecision:
    """The one decision attempt recorded, which Hermes refused before asking Oikos."""
    decision = await ApprovalDecision.objects.aget()
    assert (decision.approval_id, decision.outcome) == (approval_id, "rejected")
    return decision


class TestWebsocketIdentity:
    async def test_the_trusted_proxy_opens_the_socket_for_its_operator(
        self, control_room: RunningSim, proxy_mode: Settings
    ) -> None:
        socket = websocket("/ws/ui/", peer=TRUSTED_PROXY, headers=ALICE)

        accepted, _ = await socket.connect(timeout=10)

        assert accepted
        await socket.disconnect(timeout=5)
        assert await User.objects.filter(username="alice").aexists()

    @pytest.mark.parametrize(
        ("peer", "headers"),
        [(MESH_PEER, ALICE), (TRUSTED_PROXY, []), (MESH_PEER, [])],
        ids=["forged", "none", "direct"],
    )
    async def test_anything_else_is_refused_in_proxy_mode(
        self, control_room: RunningSim, proxy_mode: Settings, peer: str, headers: list
    ) -> None:
        accepted, _ = await websocket("/ws/ui/", peer=peer, headers=headers).connect(timeout=10)

        assert not accepted

    async def test_django_mode_needs_a_signed_in_session(self, control_room: RunningSim, django_mode: Settings) -> None:
        assert not (await websocket("/ws/ui/").connect(timeout=10))[0]

        await User.objects.acreate_user("ines", password="a long passphrase")
        form = await http("/accounts/login/")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text)
        assert token
        signed_in = await http(
            "/accounts/login/",
            method="POST",
            headers=[form.cookie_header(), FORM],
            body=f"csrfmiddlewaretoken={token[1]}&username=ines&password=a+long+passphrase".encode(),
        )
        cookies = {**form.set_cookies, **signed_in.set_cookies}
        cookie = ("cookie", "; ".join(f"{name}={value}" for name, value in cookies.items()))
        socket = websocket("/ws/ui/", headers=[cookie])

        assert (await socket.connect(timeout=10))[0]
        await socket.disconnect(timeout=5)


class TestWebsocketOrigin:
    @pytest.mark.parametrize(
        "origin", ["http://evil.example", "http://localhost:6666", "https://localhost", None], ids=str
    )
    async def test_a_foreign_origin_is_refused(self, control_room: RunningSim, origin: str | None) -> None:
        accepted, _ = await websocket("/ws/ui/", origin=origin).connect(timeout=10)

        assert not accepted

    async def test_behind_the_tls_proxy_the_public_https_origin_is_ours(
        self, control_room: RunningSim, proxy_mode: Settings
    ) -> None:
        proxy_mode.ALLOWED_HOSTS = ["oikos.example.net"]
        headers = [*ALICE, ("x-forwarded-proto", "https")]
        socket = websocket(
            "/ws/ui/", peer=TRUSTED_PROXY, host="oikos.example.net", origin="https://oikos.example.net", headers=headers
        )

        assert (await socket.connect(timeout=10))[0]
        await socket.disconnect(timeout=5)


class TestPages:
    async def test_a_page_through_the_trusted_proxy_shows_its_operator(
        self, control_room: RunningSim, proxy_mode: Settings
    ) -> None:
        page, _ = await _page("/ui/", peer=TRUSTED_PROXY, headers=ALICE)

        assert re.search(r'<span class="operator"[^>]*>alice</span>', page.text)

    @pytest.mark.parametrize("path", ["/ui/", "/ui/sessions/", "/ui/ledger/", "/ui/approvals/"])
    async def test_nothing_is_shown_anonymously_outside_local_mode(
        self, control_room: RunningSim, proxy_mode: Settings, path: str
    ) -> None:
        await AgentSession.objects.acreate(title="private matters", actor="operator:alice", origin="ui")

        response = await http(path, peer=TRUSTED_PROXY)

        assert response.status == 403
        assert b"private matters" not in response.body


class TestCsrf:
    async def test_asking_without_the_csrf_token_is_refused(self, control_room: RunningSim) -> None:
        page, _ = await _page("/ui/")

        response = await _post("/ui/ask/", "message=deploy+jellyfin", page=page, token=None)

        assert response.status == 403
        assert not await AgentSession.objects.aexists()

    async def test_asking_with_it_starts_a_turn(self, control_room: RunningSim) -> None:
        page, token = await _page("/ui/")

        response = await _post("/ui/ask/", "message=what+is+degraded%3F", page=page, token=token)

        assert response.status == 302
        assert await Turn.objects.filter(actor="operator:operator").aexists()

    async def test_deciding_without_the_csrf_token_is_refused(self, control_room: RunningSim) -> None:
        approval_id = _pending_approval(control_room)
        page, _ = await _page("/ui/")

        response = await _post(
            "/ui/approvals/decide/", f"approval_id={approval_id}&decision=approve", page=page, token=None
        )

        assert response.status == 403
        assert _oikos_approval(control_room, approval_id).status == "pending"
        refused = await _the_refused_attempt(approval_id)
        assert (refused.operator, refused.decision) == ("operator", "approve")
        assert refused.detail == "csrf_failed: CSRF check failed: CSRF token missing. (from 127.0.0.1)"
        assert refused.get_outcome_display() == "Refused by Hermes"


class TestApprovals:
    async def test_an_anonymous_decision_is_refused_in_proxy_mode(
        self, control_room: RunningSim, proxy_mode: Settings
    ) -> None:
        approval_id = _pending_approval(control_room)

        response = await _post(
            "/ui/approvals/decide/", f"approval_id={approval_id}&decision=approve", page=None, token=None
        )

        assert response.status == 403
        assert _oikos_approval(control_room, approval_id).status == "pending"
        refused = await _the_refused_attempt(approval_id)
        assert (refused.operator, refused.decision) == ("", "approve")
        assert refused.detail.startswith("not_signed_in: ")
        assert refused.detail.endswith("(from 127.0.0.1)")

    async def test_an_anonymous_decision_is_refused_in_django_mode(
        self, control_room: RunningSim, django_mode: Settings
    ) -> None:
        approval_id = _pending_approval(control_room)

        response = await _post(
            "/ui/approvals/decide/", f"approval_id={approval_id}&decision=deny", page=None, token=None
        )

        assert response.status in (302, 403)
        assert _oikos_approval(control_room, approval_id).status == "pending"
        refused = await _the_refused_attempt(approval_id)
        assert (refused.operator, refused.decision) == ("", "deny")
        assert refused.detail.startswith("not_signed_in: Sign in first")

    async def test_identity_headers_from_outside_the_proxy_are_refused_and_recorded(
        self, control_room: RunningSim, proxy_mode: Settings
    ) -> None:
        approval_id = _pending_approval(control_room)

        response = await _post(
            "/ui/approvals/decide/",
            f"approval_id={approval_id}&decision=approve&reason=trust+me",
            page=None,
            token=None,
            peer=MESH_PEER,
            headers=ALICE,
        )

        assert response.status == 403
        assert _oikos_approval(control_room, approval_id).status == "pending"
        refused = await _the_refused_attempt(approval_id)
        assert (refused.operator, refused.reason) == ("", "trust me"), "alice is who it claimed, not who it was"
        assert refused.detail.startswith("untrusted_identity_headers: ")
        assert refused.detail.endswith(f"(from {MESH_PEER})")

    async def test_refused_attempts_show_in_the_admin_with_their_reason(
        self, control_room: RunningSim, proxy_mode: Settings
    ) -> None:
        approval_id = _pending_approval(control_room)
        await _post("/ui/approvals/decide/", f"approval_id={approval_id}&decision=approve", page=None, token=None)

        admin = await http("/admin/oikos/approvaldecision/", peer=TRUSTED_PROXY, headers=ALICE)

        assert admin.status == 200
        assert approval_id in admin.text and "Refused by Hermes" in admin.text and "not_signed_in" in admin.text

    async def test_old_admin_links_to_the_audit_lead_to_its_new_app(self, proxy_mode: Settings) -> None:
        old = await http("/admin/controlroom/approvaldecision/?outcome=rejected", peer=TRUSTED_PROXY, headers=ALICE)

        assert old.status == 301
        assert old.headers["location"] == "/admin/oikos/approvaldecision/?outcome=rejected"

    async def test_refused_attempts_are_recorded_only_so_many_a_minute(
        self, control_room: RunningSim, proxy_mode: Settings, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Anyone on the mesh can send refused attempts: they must not grow the table without bound."""
        from oikos import services

        monkeypatch.setattr(services, "_refused_budget", services._MinuteBudget(5))
        for _ in range(12):
            response = await _post("/ui/approvals/decide/", "approval_id=apr-1&decision=approve", page=None, token=None)
            assert response.status == 403

        assert await ApprovalDecision.objects.filter(outcome="rejected").acount() == 5

    async def test_a_decision_through_the_ui_is_recorded_with_the_operator_in_hermes_and_in_oikos(
        self, control_room: RunningSim, proxy_mode: Settings
    ) -> None:
        approval_id = _pending_approval(control_room)
        page, token = await _page("/ui/approvals/", peer=TRUSTED_PROXY, headers=ALICE)

        response = await _post(
            "/ui/approvals/decide/",
            f"approval_id={approval_id}&decision=approve",
            page=page,
            token=token,
            peer=TRUSTED_PROXY,
            headers=ALICE,
        )

        assert response.status == 302
        decision = await ApprovalDecision.objects.aget(approval_id=approval_id)
        assert (decision.operator, decision.decision, decision.outcome) == ("alice", "approve", "decided")
        in_oikos = _oikos_approval(control_room, approval_id)
        assert (in_oikos.status, in_oikos.decided_by) == ("approved", "alice")
        admin = await http("/admin/oikos/approvaldecision/", peer=TRUSTED_PROXY, headers=ALICE)
        assert admin.status == 200
        assert approval_id in admin.text and "alice" in admin.text


class TestLimits:
    async def test_an_oversized_question_is_refused_and_nothing_is_stored(
        self, control_room: RunningSim, settings: Settings
    ) -> None:
        settings.HERMES_MAX_MESSAGE_CHARS = 1000
        page, token = await _page("/ui/")

        response = await _post("/ui/ask/", "message=" + "a" * 1001, page=page, token=token)

        assert response.status == 400
        assert "the limit is 1,000" in response.text
        assert not await AgentSession.objects.aexists()
        assert not await Message.objects.aexists()

    async def test_a_10_mb_websocket_frame_closes_the_socket_and_reaches_nothing(
        self, control_room: RunningSim
    ) -> None:
        socket = websocket("/ws/ui/")
        assert (await socket.connect(timeout=10))[0]

        await socket.send_to(text_data='{"message": "' + "a" * (10 * 1024 * 1024) + '"}')

        closed = await socket.receive_output(timeout=10)
        while closed["type"] != "websocket.close":
            closed = await socket.receive_output(timeout=10)
        assert closed["code"] == 4009  # 1009 is the server's own; an application may close with 4009
        assert not await AgentSession.objects.aexists()
