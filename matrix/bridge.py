"""The Matrix bridge: Hermes in the operators' room, as one more frontend on the turn runner.

It syncs with the homeserver as the bot (matrix-nio, no end-to-end encryption), and for each new
event in an allowlisted room decides what it is:

- an operator's message that mentions Hermes, or any operator message in a thread Hermes is in:
  a question. One Matrix thread is one Hermes session (origin `matrix`, actor `operator:<name>`);
  the turn is started through the live registry (`TurnRegistry.start`), exactly as the control
  room does, so it is watched and stopped from the control room too. A question to a session
  whose turn is still running is answered "still working on the last one", never interleaved;
- "stop" in such a thread: the running turn is stopped (wherever it runs);
- an operator's ✅/❌ on an approval card, or "approve"/"deny" in its thread: a decision
  (matrix/cards.py);
- anything else, a non-operator's message or reaction, a room not in the allowlist: ignored. A
  stranger who addresses Hermes is told once, politely, that Hermes answers operators only.

Each proactive investigation (`manage.py watch`) is posted, once its escalation is stored, as a new
thread of `HERMES_MATRIX_ESCALATION_ROOM`; replies there continue the investigation's session.
The follow-up of an execution asked in a thread (the watcher checks it, in its own process) is
posted in that thread once it has a verdict: a new message that leads with the verdict. Each run of
a schedule with a Matrix room (the watcher runs it) is posted there as one message, verdict first.

Restarts: each event is claimed in the database before it is acted on (`MatrixEvent`), and the
sync position is stored after each batch (`MatrixSync`). A restarted bridge resumes from that
position: what was sent while it was down is answered, nothing is answered twice. The very first
start stores the position without acting on the room's history, and so does a room joined later
(an invite while running): what was written there before the bot's join is recorded, never
answered (matrix/timeline.py).

Encrypted rooms are refused: the bridge cannot read them, and says so in its log (and `doctor`).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import re
import uuid
import zoneinfo
from dataclasses import dataclass, field
from typing import Any

from aiohttp import ClientError
from channels.db import database_sync_to_async
from django.urls import reverse
from nio import AsyncClient, AsyncClientConfig, JoinedRoomsResponse, JoinError, SyncError, SyncResponse

from agent.conversation.events import Approval
from agent.engine.runner import TurnRejected
from agent.live import turn_registry
from agent.models import Turn
from agent.tools.hub import ToolHub
from matrix import selectors, services
from matrix.answer import QUIET_SECONDS, AnswerStream
from matrix.cards import ApprovalCards
from matrix.config import MatrixSettings
from matrix.models import MatrixEvent
from matrix.render import escalation_content, followup_content, in_thread, schedule_run_content
from matrix.sender import MatrixSendError, RoomSender
from matrix.services import ThreadRef
from matrix.timeline import room_timeline

logger = logging.getLogger(__name__)

Kind = MatrixEvent.Kind
SYNC_TIMEOUT_MS = 30_000
RETRY_FIRST_SECONDS = 1.0
RETRY_MAX_SECONDS = 30.0
# How often the database is read for what the watcher wrote: escalations, follow-up verdicts.
POLL_SECONDS = 5.0
APPROVE = {"✅", "✔️", "👍"}
DENY = {"❌", "✖️", "👎"}
APPROVE_WORDS = {"approve", "approved", "yes, approve"}
DENY_WORDS = {"deny", "denied", "reject"}
STOP_WORDS = {"stop", "cancel"}
BUSY = "Still working on the last one — reply “stop” to stop it, or ask again when it is done."
STRANGER = (
    "Hello! I'm Hermes, the homelab's operator agent. I only take questions from the operators of "
    "this homelab, so I'll leave this one be."
)


@dataclass
class BridgeStats:
    """What tests and logs want to know about this bridge."""

    batches: int = 0
    questions: int = 0
    ignored: int = 0
    encrypted_refused: set[str] = field(default_factory=set)


class MatrixBridge:
    def __init__(
        self,
        *,
        config: MatrixSettings,
        hub: ToolHub,
        poll_seconds: float = POLL_SECONDS,
        quiet_seconds: float = QUIET_SECONDS,
    ) -> None:
        self.config = config
        # How long a turn runs before its thread gets a progress message (matrix/answer.py).
        self.quiet_seconds = quiet_seconds
        self.hub = hub
        self.client = AsyncClient(
            config.homeserver,
            config.user_id,
            # Rate limits are retried by `RoomSender`, with the newest content (see matrix/sender.py).
            config=AsyncClientConfig(max_limit_exceeded=0, max_timeouts=0, request_timeout=60),
        )
        self.client.access_token = config.access_token
        self.client.user_id = config.user_id
        self.sender = RoomSender(self.client)
        self.cards = ApprovalCards(self.sender)
        self.stats = BridgeStats()
        self.answers: set[asyncio.Task[None]] = set()
        self.poll_seconds = poll_seconds
        # Set once the first sync after start-up has been handled (tests wait for it).
        self.ready = asyncio.Event()
        self._localpart = config.user_id[1:].split(":", 1)[0]
        self._mention = re.compile(
            rf"^\s*(?:{re.escape(config.user_id)}|@?{re.escape(self._localpart)})\s*[:,]?\s*", re.IGNORECASE
        )

    # --- the sync loop -----------------------------------------------------------------------------

    async def run(self) -> None:
        """Sync forever, reconnecting with backoff (cancel to stop); Oikos is followed alongside."""
        following = asyncio.ensure_future(self.cards.follow())
        escalating = asyncio.ensure_future(self._escalations()) if self.config.escalation_room else None
        following_up = asyncio.ensure_future(self._followups())
        scheduled = asyncio.ensure_future(self._schedule_runs())
        try:
            await self._rooms_join()
            since = await database_sync_to_async(services.sync_position)(user_id=self.config.user_id)
            delay = RETRY_FIRST_SECONDS
            while True:
                response = await self._sync(since)
                if isinstance(response, SyncResponse):
                    if since:
                        await self.batch_handle(response, since=since)
                    else:
                        logger.info("First start of the Matrix bridge: the rooms' history is left unanswered")
                    await self._invites_accept(response)
                    since = response.next_batch
                    await database_sync_to_async(services.sync_position_store)(
                        user_id=self.config.user_id, next_batch=since
                    )
                    self.stats.batches += 1
                    self.ready.set()
                    delay = RETRY_FIRST_SECONDS
                    continue
                await asyncio.sleep(delay)
                delay = min(delay * 2, RETRY_MAX_SECONDS)
        finally:
            tasks = [task for task in (following, escalating, following_up, scheduled) if task is not None]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _sync(self, since: str) -> SyncResponse | None:
        try:
            response = await self.client.sync(timeout=SYNC_TIMEOUT_MS if since else 0, since=since or None)
        except (ClientError, OSError, TimeoutError) as exc:
            logger.warning("The Matrix homeserver is unreachable: %s", exc)
            return None
        if isinstance(response, SyncError):
            logger.warning("Matrix sync failed: %s %s", response.status_code, response.message)
            return None
        return response

    async def aclose(self) -> None:
        """Wait for the answers and card edits being written (turns end or are interrupted), close the HTTP session.

        No logout: the access token is the operator's to revoke, and the next start uses it again.
        """
        if self.answers:
            await asyncio.gather(*self.answers, return_exceptions=True)
        await self.cards.edits.idle()
        await self.client.close()

    async def _rooms_join(self) -> None:
        for room_id in sorted(self.config.rooms):
            try:
                response = await self.client.join(room_id)
            except (ClientError, OSError, TimeoutError) as exc:
                # Not fatal: the sync loop waits for the homeserver, and an invite is joined when it comes.
                logger.warning("Could not join %s: the homeserver is unreachable (%s)", room_id, exc)
                continue
            if isinstance(response, JoinError):
                logger.warning("Could not join %s: %s %s", room_id, response.status_code, response.message)

    async def _invites_accept(self, response: SyncResponse) -> None:
        for room_id in response.rooms.invite:
            if room_id in self.config.rooms:
                await self.client.join(room_id)
            else:
                logger.info("Invited to %s, which is not in HERMES_MATRIX_ROOMS: ignored", room_id)

    async def batch_handle(self, response: SyncResponse, *, since: str) -> None:
        for room_id, room in response.rooms.join.items():
            if room_id not in self.config.rooms:
                continue
            if self._encrypted(room_id):
                continue
            timeline = await room_timeline(
                self.client,
                room_id=room_id,
                user_id=self.config.user_id,
                events=[e.source for e in room.timeline.events if isinstance(getattr(e, "source", None), dict)],
                limited=room.timeline.limited,
                prev_batch=room.timeline.prev_batch,
                since=since,
            )
            if timeline.before_join:
                recorded = await database_sync_to_async(services.events_before_join_record)(
                    room_id=room_id, events=timeline.before_join, bot_user_id=self.config.user_id
                )
                logger.info("Joined %s: %d earlier events recorded, not answered", room_id, recorded)
            for source in timeline.events:
                # The bot's own events are never acted on: its ✅/❌ on each card are there to be tapped.
                if source.get("sender") != self.config.user_id:
                    try:
                        await self.event_handle(room_id, source)
                    except MatrixSendError as exc:
                        logger.warning("Could not answer %s in %s: %s", source.get("event_id"), room_id, exc)
                    except Exception:  # the bridge must outlive any one bad event (it stays claimed)
                        logger.exception("Handling %s in %s failed", source.get("event_id"), room_id)

    def _encrypted(self, room_id: str) -> bool:
        room = self.client.rooms.get(room_id)
        if room is None or not room.encrypted:
            return False
        if room_id not in self.stats.encrypted_refused:
            self.stats.encrypted_refused.add(room_id)
            logger.error(
                "Matrix room %s is end-to-end encrypted: the bridge does not support encryption and ignores "
                "it. Use an unencrypted room for Hermes (docs/matrix.md).",
                room_id,
            )
        return True

    # --- escalations ------------------------------------------------------------------------------

    async def _escalations(self) -> None:
        """Post each new investigation's escalation as a thread of the escalation room (cancel to stop).

        The watcher stores an escalation when its investigation's turn ends, in another process:
        the database is polled. Each is claimed before it is posted, so it is posted once.
        """
        await self.ready.wait()
        while True:
            try:
                await self.escalations_post()
            except MatrixSendError as exc:
                logger.warning("Could not post an escalation: %s", exc)
            except Exception:
                logger.exception("Posting escalations failed")
            await asyncio.sleep(self.poll_seconds)

    async def escalations_post(self) -> int:
        room_id = self.config.escalation_room
        posted = 0
        for investigation in await database_sync_to_async(selectors.escalations_unposted)(user_id=self.config.user_id):
            claimed = await database_sync_to_async(services.escalation_claim)(
                investigation_id=investigation.pk, room_id=room_id
            )
            if not claimed:
                continue
            content = escalation_content(title=investigation.title, escalation=investigation.escalation)
            event_id = await self.sender.send(room_id, functools.partial(dict, content))
            await database_sync_to_async(services.escalation_posted)(
                investigation_id=investigation.pk, event_id=event_id, session_id=investigation.session_id
            )
            posted += 1
        return posted

    # --- follow-ups ------------------------------------------------------------------------------

    async def _followups(self) -> None:
        """Post each verdict of a follow-up in the thread that asked for the execution (cancel to stop).

        The watcher runs the follow-up turn and stores its verdict (`agent.models.Change`) in another
        process: the database is polled. Each is claimed before it is posted, so it is posted once.
        """
        await self.ready.wait()
        while True:
            try:
                await self.followups_post()
            except MatrixSendError as exc:
                logger.warning("Could not post a follow-up: %s", exc)
            except Exception:
                logger.exception("Posting follow-ups failed")
            await asyncio.sleep(self.poll_seconds)

    async def followups_post(self) -> int:
        posted = 0
        for post in await database_sync_to_async(selectors.followups_unposted)(user_id=self.config.user_id):
            claimed = await database_sync_to_async(services.followup_claim)(
                execution_id=post.execution_id, room_id=post.room_id
            )
            if not claimed:
                continue
            mention, asked = self._followup_people(post.asked_by, post.decided_by)
            content = followup_content(
                action=post.action,
                target=post.target,
                verdict=post.verdict,
                detail=post.verdict_detail,
                error=post.error,
                answer=post.answer,
                undo=post.undo,
                asked=asked,
            )
            event_id = await self.sender.send(
                post.room_id,
                functools.partial(
                    in_thread, content, root_event_id=post.root_event_id, reply_to=post.reply_to, mention=mention
                ),
            )
            await database_sync_to_async(services.followup_posted)(execution_id=post.execution_id, event_id=event_id)
            posted += 1
        return posted

    # --- schedules' runs ---------------------------------------------------------------------------

    async def _schedule_runs(self) -> None:
        """Post each ended run of a schedule in the schedule's room (cancel to stop).

        The watcher runs the schedules in another process: the database is polled. Each run is
        claimed before it is posted, so it is posted once, by one bridge, whatever restarts.
        """
        await self.ready.wait()
        while True:
            try:
                await self.schedule_runs_post()
            except Exception:
                logger.exception("Posting schedules' runs failed")
            await asyncio.sleep(self.poll_seconds)

    async def schedule_runs_post(self) -> int:
        posted = 0
        posts = await database_sync_to_async(selectors.schedule_posts_unposted)(user_id=self.config.user_id)
        joined = await self._rooms_joined() if posts else None
        for post in posts:
            claimed = await database_sync_to_async(services.schedule_post_claim)(
                run_id=post.run_id, room_id=post.room_id
            )
            if not claimed:
                continue
            refused = self._room_refused(post.room_id, joined)
            if refused:
                logger.warning(
                    "The run %s of schedule %r is not posted in %s: %s", post.run_id, post.name, post.room_id, refused
                )
                await database_sync_to_async(services.schedule_post_failed)(run_id=post.run_id, error=refused)
                continue
            content = schedule_run_content(
                name=post.name,
                state=post.state,
                skipped_reason=post.skipped_reason,
                when=post.slot.astimezone(zoneinfo.ZoneInfo(post.timezone)).strftime("%a %-d %b, %H:%M %Z"),
                verdict=post.verdict,
                answer=post.answer,
                link=self._session_url(post.session_id),
            )
            try:
                event_id = await self.sender.send(post.room_id, functools.partial(dict, content))
            except MatrixSendError as exc:
                logger.warning(
                    "The run %s of schedule %r could not be posted in %s: %s", post.run_id, post.name, post.room_id, exc
                )
                await database_sync_to_async(services.schedule_post_failed)(run_id=post.run_id, error=str(exc))
                continue
            await database_sync_to_async(services.schedule_post_posted)(
                run_id=post.run_id, event_id=event_id, session_id=post.session_id
            )
            posted += 1
        return posted

    async def _rooms_joined(self) -> set[str] | None:
        """The rooms the bot is in, as the homeserver says now (None when it cannot say: then sending tells)."""
        try:
            response = await self.client.joined_rooms()
        except (ClientError, OSError, TimeoutError):
            return None
        return set(response.rooms) if isinstance(response, JoinedRoomsResponse) else None

    def _room_refused(self, room_id: str, joined: set[str] | None) -> str:
        """Why the bot will not post in `room_id` ("" when it may): only in a room it serves and is in."""
        if room_id not in self.config.rooms:
            return "the room is not one of the bridge's rooms (HERMES_MATRIX_ROOMS)"
        if joined is not None and room_id not in joined:
            return "the bot is not in the room (invite it)"
        if self._encrypted(room_id):
            return "the room is end-to-end encrypted, which the bridge does not support"
        return ""

    def _session_url(self, session_id: uuid.UUID | None) -> str:
        """The session in the control room, when the bridge knows where that is (HERMES_MATRIX_CONTROLROOM_URL)."""
        if session_id is None or not self.config.controlroom_url:
            return ""
        return self.config.controlroom_url + reverse("controlroom:session", kwargs={"session_id": session_id})

    def _followup_people(self, asked_by: str, decided_by: str) -> tuple[str, str]:
        """Whom the verdict is for (a Matrix user to mention: the operator who asked, else the one who
        approved), and the line that says who asked and approved."""
        users = {name: user for user, name in self.config.operators.items()}
        kind, _, asker = asked_by.partition(":")
        asker = asker if kind == "operator" else ""
        mention = users.get(asker) or users.get(decided_by) or ""
        parts = [f"asked by {asker}" if asker else "", f"approved by {decided_by}" if decided_by else ""]
        line = ", ".join(part for part in parts if part)
        return mention, (line[0].upper() + line[1:] + ".") if line else ""

    # --- one event ---------------------------------------------------------------------------------

    async def event_handle(self, room_id: str, event: dict[str, Any]) -> None:
        kind = event.get("type")
        content = event.get("content") or {}
        if not isinstance(content, dict):
            return
        if kind == "m.reaction":
            await self._reaction(room_id, event, content)
        elif kind == "m.room.message":
            await self._message(room_id, event, content)

    async def _message(self, room_id: str, event: dict[str, Any], content: dict[str, Any]) -> None:
        relation = content.get("m.relates_to") or {}
        if relation.get("rel_type") == "m.replace":
            return  # an edit: the question was taken as first sent
        body = content.get("body")
        if not isinstance(body, str):
            return
        root = relation.get("event_id") if relation.get("rel_type") == "m.thread" else None
        thread = (
            await database_sync_to_async(services.thread_find)(room_id=room_id, root_event_id=root) if root else None
        )
        if thread is None and not self._mentioned(body, content):
            return  # room chatter, not for Hermes
        event_id, sender = str(event.get("event_id")), str(event.get("sender"))
        operator = self.config.operators.get(sender)
        if operator is None:
            await self._stranger(room_id, event_id, sender, root or event_id)
            return
        text = self._mention.sub("", body, count=1).strip()
        word = text.lower().strip(" .!")
        if thread is not None and word in STOP_WORDS:
            if await self._claim(room_id, event, Kind.STOP):
                await self._stop(thread, event_id)
            return
        if thread is not None and (word in APPROVE_WORDS or word in DENY_WORDS):
            card = await database_sync_to_async(selectors.card_pending_in_thread)(room_id=room_id, root_event_id=root)
            if card is not None:
                if await self._claim(room_id, event, Kind.DECISION):
                    outcome = await self.cards.decide(card, approve=word in APPROVE_WORDS, operator=operator)
                    await self._outcome(event_id, outcome)
                return
        if await self._claim(room_id, event, Kind.QUESTION):
            self.stats.questions += 1
            outcome = await self._question(
                room_id=room_id,
                root=root or event_id,
                thread=thread,
                event_id=event_id,
                asker=sender,
                text=text,
                operator=operator,
            )
            await self._outcome(event_id, outcome)

    async def _reaction(self, room_id: str, event: dict[str, Any], content: dict[str, Any]) -> None:
        relation = content.get("m.relates_to") or {}
        key = str(relation.get("key") or "")
        if relation.get("rel_type") != "m.annotation" or key not in APPROVE | DENY:
            return
        card = await database_sync_to_async(selectors.card_by_event)(event_id=str(relation.get("event_id")))
        if card is None:
            return
        operator = self.config.operators.get(str(event.get("sender")))
        if operator is None:
            # A non-operator's reaction changes nothing (Oikos would refuse it too: it never gets there).
            if await self._claim(room_id, event, Kind.IGNORED):
                self.stats.ignored += 1
                await self._outcome(str(event.get("event_id")), "non_operator_reaction")
            return
        if await self._claim(room_id, event, Kind.DECISION):
            outcome = await self.cards.decide(card, approve=key in APPROVE, operator=operator)
            await self._outcome(str(event.get("event_id")), outcome)

    def _mentioned(self, body: str, content: dict[str, Any]) -> bool:
        mentions = content.get("m.mentions") or {}
        if isinstance(mentions, dict) and self.config.user_id in (mentions.get("user_ids") or []):
            return True
        return self.config.user_id in body or bool(self._mention.match(body))

    async def _claim(self, room_id: str, event: dict[str, Any], kind: str) -> bool:
        return await database_sync_to_async(services.event_claim)(
            event_id=str(event.get("event_id")), room_id=room_id, sender=str(event.get("sender")), kind=kind
        )

    async def _outcome(self, event_id: str, outcome: str) -> None:
        await database_sync_to_async(services.event_outcome_set)(event_id=event_id, outcome=outcome)

    async def _stranger(self, room_id: str, event_id: str, sender: str, root: str) -> None:
        if not await self._claim(room_id, {"event_id": event_id, "sender": sender}, Kind.IGNORED):
            return
        self.stats.ignored += 1
        await self._outcome(event_id, "stranger")
        logger.info("Ignored %s in %s: %s is not an operator (HERMES_MATRIX_OPERATORS)", event_id, room_id, sender)
        if await database_sync_to_async(services.stranger_tell)(user_id=sender):
            await self._notice(room_id, root, event_id, STRANGER)

    async def _notice(self, room_id: str, root: str, reply_to: str, text: str) -> None:
        content = {"msgtype": "m.notice", "body": text}
        await self.sender.send(room_id, lambda: in_thread(content, root_event_id=root, reply_to=reply_to))

    # --- questions and stops -----------------------------------------------------------------------

    async def _question(
        self,
        *,
        room_id: str,
        root: str,
        thread: ThreadRef | None,
        event_id: str,
        asker: str,
        text: str,
        operator: str,
    ) -> str:
        """Start the turn now (so a second question in the thread finds it busy), follow it in a task."""
        try:
            handle = await turn_registry().start(
                text=text,
                actor=f"operator:{operator}",
                origin="matrix",
                session_id=thread.session_id if thread else None,
                hub=self.hub,
            )
        except TurnRejected as rejected:
            await self._notice(room_id, root, event_id, rejected.operator_message(busy=BUSY))
            return "busy" if rejected.busy else "rejected"
        if thread is None:
            await database_sync_to_async(services.thread_link)(
                room_id=room_id, root_event_id=root, session_id=handle.session_id
            )
            thread = ThreadRef(room_id, root, handle.session_id)
        stream = AnswerStream(
            sender=self.sender,
            thread=thread,
            reply_to=event_id,
            asker=asker,
            edit_seconds=self.config.edit_seconds,
            quiet_seconds=self.quiet_seconds,
            on_approval=lambda approval, arguments: self._approval(thread, approval, arguments),
        )
        task = asyncio.get_running_loop().create_task(self._answer(stream, handle))
        self.answers.add(task)
        task.add_done_callback(self.answers.discard)
        return "started"

    async def _answer(self, stream: AnswerStream, handle: Any) -> None:
        try:
            await stream.follow(handle)
        except MatrixSendError as exc:
            logger.warning("The answer of turn %s could not be posted in full: %s", handle.turn_id, exc)
        except Exception:
            logger.exception("The answer of turn %s failed", handle.turn_id)

    async def _approval(self, thread: ThreadRef, approval: Approval, arguments: dict[str, Any]) -> None:
        try:
            await self.cards.post(thread, approval, arguments)
        except MatrixSendError as exc:
            logger.warning("The approval card of %s could not be posted: %s", approval.approval_id, exc)

    async def _stop(self, thread: ThreadRef, event_id: str) -> None:
        turn_id = await database_sync_to_async(_turn_running)(session_id=thread.session_id)
        if turn_id is None:
            await self._notice(thread.room_id, thread.root_event_id, event_id, "Nothing is running in this thread.")
            await self._outcome(event_id, "idle")
            return
        await turn_registry().turn_stop(turn_id=turn_id)
        await self._outcome(event_id, "stopped")


def _turn_running(*, session_id: uuid.UUID) -> uuid.UUID | None:
    return Turn.objects.filter(session_id=session_id, status=Turn.Status.RUNNING).values_list("id", flat=True).first()
