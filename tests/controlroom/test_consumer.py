"""The control room's websocket, driven by `WebsocketCommunicator` on the real ASGI application.

Turns run against the scripted model and a real oikos_sim; frames are the htmx swaps a browser
would apply. Every test runs on the in-memory layer (messages round-tripped through JSON) and on
the Redis layer.
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import json
import re
import uuid

import pytest
from channels.db import database_sync_to_async
from channels.layers import BaseChannelLayer

from agent.broadcast import session_group
from agent.conversation.events import TextDelta
from agent.live import TurnRegistry, turn_registry
from agent.models import Message, Turn
from controlroom import selectors
from oikos_sim.server import RunningSim
from tests.controlroom.conftest import Connect, Frames, browser_socket
from tests.controlroom.test_long_history import questions_in, session_with_turns
from tests.fakes import FakeAnthropic, Reply
from tests.fakes.channel_layers import live_turn
from tests.fakes.scripted_models import ExecutionRequester
from tests.security.asgi_client import http
from transcript import selectors as transcript_selectors

pytestmark = pytest.mark.django_db(transaction=True)

ANSWER = "Caddy fronts **twelve** services; all answer.\n\n- `service:jellyfin`\n- `service:gitea`"
LONG = " ".join(f"word{n}" for n in range(400))


async def _session_with_one_turn(llm: FakeAnthropic, text: str = "is caddy fine?") -> uuid.UUID:
    llm.enqueue(Reply.text(ANSWER))
    handle = await live_turn(text)
    await handle.wait()
    return handle.session_id


def _group(pattern: str, text: str, flags: int = 0) -> str:
    """The first group of `pattern`'s first match in `text` (which must match)."""
    found = re.search(pattern, text, flags)
    assert found is not None, pattern
    return found[1]


async def _watching(llm: FakeAnthropic, socket: Connect) -> tuple[uuid.UUID, Frames]:
    """A session with one finished turn, and a control room on it past its snapshot."""
    session_id = await _session_with_one_turn(llm)
    frames = await socket(f"/ws/ui/?session={session_id}")
    await frames.next()
    return session_id, frames


def _turn_frames(frames: Frames, turn_id: uuid.UUID) -> list[str]:
    return [frame for frame in frames.received if str(turn_id) in frame]


def _finished(turn_id: uuid.UUID) -> re.Pattern[str]:
    return re.compile(rf'<article class="turn turn-(done|cancelled|error)" id="turn-{turn_id}" hx-swap-oob="true"')


async def test_snapshot_then_a_live_turn_streams_in_coalesced_steps_and_ends_as_markdown(
    llm: FakeAnthropic, oikos_settings: RunningSim, socket: Connect
) -> None:
    session_id = await _session_with_one_turn(llm)
    frames = await socket(f"/ws/ui/?session={session_id}")

    snapshot = await frames.next()
    assert 'hx-swap-oob="innerHTML:#transcript"' in snapshot
    assert "is caddy fine?" in snapshot and "<strong>twelve</strong>" in snapshot

    llm.enqueue(Reply.text(LONG, chunk=3, delay=0.001))
    handle = await live_turn("and now a long one", session_id=session_id)
    done = await frames.until(_finished(handle.turn_id).search)

    turn_frames = _turn_frames(frames, handle.turn_id)
    assert 'hx-swap-oob="beforeend:#transcript"' in turn_frames[0] and "and now a long one" in turn_frames[0]
    appended = re.findall(rf'<span hx-swap-oob="beforeend:#blk-{handle.turn_id}-0">(.*?)</span>', frames.text(), re.S)
    streamed = html.unescape(_group(r'class="text streaming"[^>]*>(.*?)</div>', frames.text(), re.S))
    deltas = [event for event in handle.log if isinstance(event, TextDelta)]
    # Coalesced: far fewer frames than deltas, and still the text grew in several steps.
    assert 2 <= len(appended) < len(deltas) / 3, (len(appended), len(deltas))
    assert streamed + "".join(html.unescape(part) for part in appended) == LONG
    assert f'<div class="text md" id="blk-{handle.turn_id}-0"><p>{LONG}</p>' in done
    assert 'class="status status-done"' in done and f'href="/ui/ledger/?turn={handle.turn_id}"' in done


async def test_a_socket_joining_mid_turn_gets_the_turn_so_far_from_its_owner_then_the_rest(
    llm: FakeAnthropic, oikos_settings: RunningSim, socket: Connect
) -> None:
    session_id = await _session_with_one_turn(llm)
    llm.enqueue(Reply.text(LONG, chunk=8, delay=0.004))
    handle = await live_turn("long again", session_id=session_id)
    async with asyncio.timeout(10), contextlib.aclosing(handle.events()) as events:
        deltas = 0
        async for event in events:
            deltas += isinstance(event, TextDelta)
            if deltas == 20:
                break

    frames = await socket(f"/ws/ui/?session={session_id}")
    await frames.next()  # the snapshot, drawn from the database
    redraw = await frames.until(lambda f: f'<article class="turn turn-running" id="turn-{handle.turn_id}"' in f)
    so_far = html.unescape(_group(r'class="text streaming"[^>]*>(.*?)</div>', redraw, re.S))
    # What the owner had published (coalescing may hold back the last few milliseconds).
    assert len(so_far) >= 10 * 8 and LONG.startswith(so_far)
    done = await frames.until(_finished(handle.turn_id).search)
    assert f"<p>{LONG}</p>" in done


async def test_a_gap_in_the_numbering_is_repaired_from_the_owners_state(
    llm: FakeAnthropic, oikos_settings: RunningSim, socket: Connect, channel_layer: BaseChannelLayer
) -> None:
    session_id, frames = await _watching(llm, socket)
    llm.enqueue(Reply.text(LONG, chunk=8, delay=0.004))
    handle = await live_turn("long with a gap", session_id=session_id)
    await frames.until(lambda f: f"beforeend:#blk-{handle.turn_id}-0" in f)

    # A message from far ahead: the ones in between were lost (the in-memory layer drops past capacity).
    lost = {"type": "text", "block": 0, "text": "NEVER-SENT"}
    await channel_layer.group_send(
        session_group(session_id),
        {
            "type": "turn.event",
            "turn_id": str(handle.turn_id),
            "session_id": str(session_id),
            "first": 10_000,
            "through": 10_000,
            "events": [lost],
        },
    )

    redraw = await frames.until(lambda f: f'<article class="turn turn-running" id="turn-{handle.turn_id}"' in f)
    assert "NEVER-SENT" not in redraw
    done = await frames.until(_finished(handle.turn_id).search)
    assert f"<p>{LONG}</p>" in done and "NEVER-SENT" not in frames.text()


async def test_stop_from_another_process_cancels_the_turn_and_keeps_its_partial_text(
    llm: FakeAnthropic, oikos_settings: RunningSim, socket: Connect
) -> None:
    session_id, frames = await _watching(llm, socket)
    llm.enqueue(Reply.text(LONG, chunk=4, delay=0.01))
    handle = await live_turn("a long one to stop", session_id=session_id)
    await frames.until(lambda f: 'class="stop"' in f)
    await frames.until(lambda f: "beforeend:#blk-" in f)

    # Another process's registry: it does not own the turn and reaches the owner through the layer.
    await TurnRegistry().turn_stop(turn_id=handle.turn_id)

    done = await frames.until(_finished(handle.turn_id).search)
    assert "Stopped." in done and 'class="status status-cancelled"' in done
    # The Stop button goes away with the turn.
    assert re.search(r'<div hx-swap-oob="innerHTML:#turn-controls">\s*</div>', done)
    turn = await database_sync_to_async(Turn.objects.get)(pk=handle.turn_id)
    assert (turn.status, turn.error) == ("cancelled", "Cancelled by the operator.")
    texts = await database_sync_to_async(list)(
        Message.objects.filter(turn_id=handle.turn_id, role="assistant").values_list("content", flat=True)
    )
    partial = texts[-1][0]["text"]
    assert partial and LONG.startswith(partial) and len(partial) < len(LONG)


async def test_a_turn_asked_over_the_http_api_shows_live_and_stops_from_the_control_room(
    llm: FakeAnthropic, oikos_settings: RunningSim, socket: Connect
) -> None:
    session_id, frames = await _watching(llm, socket)
    llm.enqueue(Reply.text(LONG, chunk=4, delay=0.01))
    body = json.dumps({"message": "a script asks a long one", "session_id": str(session_id)}).encode()
    script = asyncio.create_task(
        http("/chat", method="POST", headers=[("content-type", "application/json")], body=body)
    )

    started = await frames.until(lambda f: "a script asks a long one" in f)
    turn_id = _group(r'id="turn-([0-9a-f-]{36})"', started)
    # The question is the script's operator's (local mode: `operator`), not "You".
    assert '<span class="speaker">operator</span>' in started
    await frames.until(lambda f: f"beforeend:#blk-{turn_id}-0" in f)
    # The operator presses Stop on the page: the same path as the control room's Stop button.
    await turn_registry().turn_stop(turn_id=uuid.UUID(turn_id))

    done = await frames.until(_finished(uuid.UUID(turn_id)).search)
    assert 'class="status status-cancelled"' in done
    response = await script
    assert response.status == 200 and response.headers["x-hermes-turn"] == turn_id
    # The script's stream ends with the same outcome.
    assert '"status":"cancelled"' in response.text.split("event: done")[-1]


async def test_the_rail_follows_oikos_and_an_inline_approval_follows_its_execution(
    llm: FakeAnthropic, oikos_settings: RunningSim, socket: Connect
) -> None:
    llm.responder = ExecutionRequester(target="service:jellyfin", action="deploy")
    handle = await live_turn("deploy jellyfin")
    frames = await socket(f"/ws/ui/?session={handle.session_id}&rail=1")
    await frames.until(lambda f: "1 degraded" in f and 'hx-swap-oob="innerHTML:#rail"' in f)

    def carries_the_card(frame: str) -> bool:
        return "card approval" in frame and "service:jellyfin" in frame

    # A fast turn is already stored when the socket connects: then the card came with the
    # snapshot, which may arrive before the rail; otherwise it comes live.
    card = next(filter(carries_the_card, frames.received), None) or await frames.until(carries_the_card)
    assert 'data-stage="pending"' in card
    # Its Approve button submits a form kept outside the transcript (where htmx is disabled).
    form_id = re.search(r'<form id="(decide-[0-9a-f]{16}-approve)"', frames.text())
    assert form_id and f'form="{form_id[1]}"' in card

    approval_id = _group(r"<code>(apr-\d+)</code>", frames.text())
    oikos = oikos_settings.state.desk
    await asyncio.to_thread(_approve_in_oikos, oikos_settings, approval_id)

    completed = await frames.until(lambda f: "outerHTML:.apr-" in f and 'data-stage="completed"' in f)
    assert "approved by alice" in completed
    assert oikos.approval_get(approval_id).decided_by == "alice"
    await handle.wait()


def _approve_in_oikos(sim: RunningSim, approval_id: str) -> None:
    import httpx2

    from tests.fakes.oikos_fixtures import OPERATOR_TOKEN

    response = httpx2.post(
        f"{sim.api_url}/approvals/{approval_id}/approve",
        json={"operator": "alice"},
        headers={"Authorization": f"Bearer {OPERATOR_TOKEN}"},
    )
    response.raise_for_status()


async def test_ids_chosen_by_the_model_never_reach_element_ids(
    llm: FakeAnthropic, oikos_settings: RunningSim, socket: Connect
) -> None:
    session_id, frames = await _watching(llm, socket)
    hostile = 'toolu_1" onmouseover="alert(1)'
    llm.enqueue(
        Reply.tool_use("mcp__oikos__get_entity", {"slug": "<script>alert(1)</script>"}, id=hostile),
        Reply.text("<img src=x onerror=alert(1)> done"),
    )
    handle = await live_turn("hostile", session_id=session_id)
    await frames.until(_finished(handle.turn_id).search)

    sent = frames.text()
    assert 'onmouseover="alert(1)' not in sent and "<script>alert" not in sent and "<img src=x" not in sent
    assert re.search(rf'<details class="chip chip-(ok|error)" id="chip-{handle.turn_id}-[0-9a-f]{{16}}"', sent)
    assert "&lt;img src=x onerror=alert(1)&gt; done" in sent


async def test_a_socket_from_another_origin_is_refused(channel_layer: object) -> None:
    communicator = browser_socket("/ws/ui/", origin=b"http://evil.example")
    connected, _ = await communicator.connect(timeout=5)
    assert not connected


async def test_a_drawers_snapshot_draws_as_many_turns_as_its_page_did(socket: Connect) -> None:
    """The drawer draws fewer turns than a session page; a (re)connecting socket must not put a
    session page's worth back, nor drop to fewer than a session page without being asked."""
    total = transcript_selectors.SESSION_TURNS_SHOWN + 1
    session, _turn_ids = await database_sync_to_async(session_with_turns)(total)

    drawer = await socket(f"/ws/ui/?session={session.id}&turns={selectors.DRAWER_TURNS_SHOWN}")
    assert questions_in(await drawer.next()) == list(range(total - selectors.DRAWER_TURNS_SHOWN, total))
    for query in ("", "&turns=many", f"&turns={total * 10}"):
        page = await socket(f"/ws/ui/?session={session.id}{query}")
        assert questions_in(await page.next()) == list(range(1, total)), query
