"""Daily token budgets: what a turn may spend, and what today's turns have spent.

Two budgets, both per day and both in tokens (input + output + cache read + cache write, what the
API reports): one for every turn (`HERMES_DAILY_TOKEN_BUDGET`) and one for investigations, the
sessions Hermes opens itself when Oikos raises a signal (origin `signal`,
`HERMES_INVESTIGATION_DAILY_TOKEN_BUDGET`). 0 means unlimited. A day starts at midnight in
`HERMES_BUDGET_TIMEZONE` (UTC by default), and spend is the tokens of the turns *started* that day —
a turn running across midnight counts on the day it began, so a day's figure never shrinks.

The check happens when a turn starts and nowhere else (`turn_admit`, in the transaction that stores
the turn): a turn that started under the budget runs to its end, so an answer is never cut off
mid-way. To keep turns running at once from all starting on the same room, each admitted turn holds
a reservation (`Turn.tokens_reserved`): its per-turn budget, shrunk to the room left. While it runs
a turn counts the larger of its hold and what it has spent; once it ends, what it spent. Admissions
take one lock (a PostgreSQL advisory transaction lock; on SQLite the write lock every transaction
takes at its start), so of N turns racing for the last room one gets it. The turn's per-turn token
budget becomes its hold, so the spend passes a ceiling by at most the model call in which each
running turn reached its hold, and the forced final answer after it.

Ceilings: operators' questions and investigations of critical signals may spend the whole daily
budget. Everything else — peers (A2A, `mcp_serve`) and other investigations — stops at the daily
budget less its reserve (`HERMES_BUDGET_RESERVE_SHARE`), and a peer also at its own share
(`HERMES_PEER_BUDGET_SHARE`, or `budget_share` in the peers file), counted over the turns its actor
`peer:<name>` started today. A peer that is not counted elsewhere (`mcp_serve`) is also held to a
number of turns per window here.

Budgets count tokens, never dollars (agent/prices.py), so a stale price cannot stop Hermes.
"""

from __future__ import annotations

import datetime
import math
import zoneinfo
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Literal

from django.conf import settings
from django.db import connection
from django.db.models import Case, F, QuerySet, Sum, When
from django.db.models.functions import Greatest
from django.utils import timezone

from agent.models import Turn

BudgetKind = Literal["interactive", "investigation"]

# The session origin of investigations (sessions Hermes opens itself for an Oikos signal).
INVESTIGATION_ORIGIN = "signal"
# Any constant the other advisory locks of Hermes do not use (presence uses per-process keys).
ADMISSION_LOCK_KEY = 0x48_42_55_44_47_54  # "HBUDGT"
# What a refusal that only running turns' holds caused tells the caller to wait: they end or shrink
# to what they spent within a turn's time, and most within a minute.
HOLDS_RETRY_SECONDS = 60

USAGE_FIELDS = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")


@dataclass(frozen=True, kw_only=True)
class BudgetConfig:
    """The daily token budgets (0: unlimited), read at each use so that tests may change them."""

    daily: int
    investigation_daily: int
    # Shares of the daily budget: kept back for operators and critical investigations, and one peer's.
    reserve_share: float
    peer_share: float
    # The IANA time zone whose midnight starts a budget day.
    timezone: str

    @classmethod
    def from_settings(cls) -> BudgetConfig:
        return cls(
            daily=settings.HERMES_DAILY_TOKEN_BUDGET,
            investigation_daily=settings.HERMES_INVESTIGATION_DAILY_TOKEN_BUDGET,
            reserve_share=settings.HERMES_BUDGET_RESERVE_SHARE,
            peer_share=settings.HERMES_PEER_BUDGET_SHARE,
            timezone=settings.HERMES_BUDGET_TIMEZONE,
        )


def usage_tokens_total(usage: dict[str, int]) -> int:
    """Every token the API reported for the usage, cached ones included: what budgets count."""
    return sum(int(usage.get(field) or 0) for field in USAGE_FIELDS)


def budget_day_start(now: datetime.datetime | None = None) -> datetime.datetime:
    """Midnight of today in the budget's time zone."""
    zone = zoneinfo.ZoneInfo(BudgetConfig.from_settings().timezone)
    local = (now or timezone.now()).astimezone(zone)
    return local.replace(hour=0, minute=0, second=0, microsecond=0)


@dataclass(frozen=True)
class Spend:
    """Today's spend: every turn's, and investigations' (a part of it).

    `tokens` is what was spent; `reserved_tokens` what running turns hold beyond what they have
    spent so far. Admission counts both.
    """

    day_start: datetime.datetime
    tokens: int
    cost_usd: Decimal
    investigation_tokens: int
    investigation_cost_usd: Decimal
    reserved_tokens: int = 0
    investigation_reserved_tokens: int = 0

    @property
    def committed(self) -> int:
        return self.tokens + self.reserved_tokens

    @property
    def investigation_committed(self) -> int:
        return self.investigation_tokens + self.investigation_reserved_tokens


def _turns_today(start: datetime.datetime) -> QuerySet[Any]:
    return Turn.objects.filter(started_at__gte=start)


def _counted() -> Case:
    """What a turn counts against a budget: while it runs, the larger of its hold and its spend."""
    return Case(
        When(status=Turn.Status.RUNNING, then=Greatest(F("tokens_total"), F("tokens_reserved"))),
        default=F("tokens_total"),
    )


def _committed(turns: QuerySet[Any]) -> int:
    return int(turns.aggregate(tokens=Sum(_counted()))["tokens"] or 0)


def spend_today() -> Spend:
    """Sums over the turns started today: two aggregates on the `started_at` index."""
    start = budget_day_start()
    today = _turns_today(start)
    sums = {"tokens": Sum("tokens_total"), "cost": Sum("cost_usd"), "committed": Sum(_counted())}
    every = today.aggregate(**sums)
    theirs = today.filter(session__origin=INVESTIGATION_ORIGIN).aggregate(**sums)
    return Spend(
        day_start=start,
        tokens=every["tokens"] or 0,
        cost_usd=every["cost"] or Decimal(0),
        investigation_tokens=theirs["tokens"] or 0,
        investigation_cost_usd=theirs["cost"] or Decimal(0),
        reserved_tokens=(every["committed"] or 0) - (every["tokens"] or 0),
        investigation_reserved_tokens=(theirs["committed"] or 0) - (theirs["tokens"] or 0),
    )


@dataclass(frozen=True)
class PeerAllowance:
    """What one peer may spend per day and, where nothing else counts its messages, how often it
    may ask: from its entry in the peers file (interop/peers.py) or the defaults."""

    name: str
    # Of the daily budget.
    share: float
    # Turns per `window` seconds counted at admission; None when the transport counts them itself
    # (A2A counts a peer's messages per conversation exchange, interop/services.py).
    rate_limit: int | None = None
    window: float = 60.0

    @property
    def actor(self) -> str:
        return f"peer:{self.name}"


@dataclass(frozen=True)
class BudgetVerdict:
    """Whether a turn of `kind` may start now, and if not, what to tell people."""

    allowed: bool
    kind: BudgetKind
    # The ceiling that decided: `daily`, `investigation`, `reserve` or `peer` (empty when allowed).
    exhausted: str
    spent_tokens: int
    budget_tokens: int
    message: str = ""
    # The tokens left under every ceiling that applies; None when none does.
    room: int | None = None
    # Seconds after which asking again may succeed (refusals only).
    retry_after: int = 0


class BudgetRefused(Exception):
    """A turn may not start (`turn_admit`): `code` is `budget_exhausted` or `rate_limited`."""

    def __init__(self, code: str, message: str, *, retry_after: int) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.retry_after = retry_after


def budget_limited(kind: BudgetKind, peer: PeerAllowance | None = None) -> bool:
    """Whether a budget or a rate applies to this turn (else admission allows without a query)."""
    config = BudgetConfig.from_settings()
    return bool(
        config.daily
        or (kind == "investigation" and config.investigation_daily)
        or (peer is not None and peer.rate_limit)
    )


def _until_reset(day_start: datetime.datetime) -> int:
    # Wall-clock arithmetic on the zone-aware midnight: the next midnight even across a DST change.
    reset = day_start + datetime.timedelta(days=1)
    return max(1, math.ceil((reset - timezone.now()).total_seconds()))


@dataclass(frozen=True)
class _Ceiling:
    name: str
    budget: int
    committed: int  # spent, and held by running turns
    spent: int


def _refusal(
    kind: BudgetKind, ceiling: _Ceiling, peer: PeerAllowance | None, day_start: datetime.datetime
) -> BudgetVerdict:
    zone = BudgetConfig.from_settings().timezone
    held = ceiling.committed - ceiling.spent
    counted = f"{ceiling.committed:,} of {ceiling.budget:,} tokens" + (
        f", {held:,} of them held by turns still running" if held > 0 else ""
    )
    if ceiling.name == "investigation":
        message = (
            f"Today's investigation budget is spent ({counted}): no investigation starts before it resets at "
            f"midnight ({zone})."
        )
    elif ceiling.name == "daily":
        message = (
            f"Today's token budget is spent ({counted}): Hermes takes new questions again after midnight "
            f"({zone}), or when an operator raises HERMES_DAILY_TOKEN_BUDGET."
        )
    elif ceiling.name == "reserve":
        message = (
            f"Today's token budget is spent down to its reserve ({counted}): the rest is kept for operators' "
            f"questions and investigations of critical signals until midnight ({zone})."
        )
    else:
        assert peer is not None
        message = (
            f"The peer {peer.name}'s share of today's token budget is spent ({counted}): it may ask again "
            f"after midnight ({zone})."
        )
    # Refused only because of what running turns hold: asking again once they end may succeed.
    retry_after = HOLDS_RETRY_SECONDS if ceiling.spent < ceiling.budget else _until_reset(day_start)
    return BudgetVerdict(
        allowed=False,
        kind=kind,
        exhausted=ceiling.name,
        spent_tokens=ceiling.committed,
        budget_tokens=ceiling.budget,
        message=message,
        room=0,
        retry_after=retry_after,
    )


def budget_check(*, kind: BudgetKind, reserve: bool | None = None, peer: PeerAllowance | None = None) -> BudgetVerdict:
    """May a turn of `kind` start now? Synchronous (it queries the database); it reserves nothing.

    Interactive turns need the daily budget not spent; investigations need their own budget not
    spent, and the daily one too (they are turns like any other). `reserve`: whether the turn may
    spend the daily budget's reserve (operators' questions and investigations of critical signals;
    by default interactive turns that are not a peer's). `peer`: the peer asking, held to its share.
    Every figure counts what running turns hold (`turn_admit`).
    """
    if reserve is None:
        reserve = kind == "interactive" and peer is None
    config = BudgetConfig.from_settings()
    daily = config.daily
    investigation = config.investigation_daily if kind == "investigation" else 0
    if not daily and not investigation:
        return BudgetVerdict(allowed=True, kind=kind, exhausted="", spent_tokens=0, budget_tokens=0)
    spend = spend_today()
    ceilings: list[_Ceiling] = []
    if investigation:
        ceilings.append(
            _Ceiling("investigation", investigation, spend.investigation_committed, spend.investigation_tokens)
        )
    if daily:
        ceilings.append(_Ceiling("daily", daily, spend.committed, spend.tokens))
        if not reserve:
            kept = round(daily * config.reserve_share)
            ceilings.append(_Ceiling("reserve", daily - kept, spend.committed, spend.tokens))
        if peer is not None:
            theirs = _turns_today(spend.day_start).filter(actor=peer.actor)
            spent = int(theirs.aggregate(tokens=Sum("tokens_total"))["tokens"] or 0)
            ceilings.append(_Ceiling("peer", round(daily * peer.share), _committed(theirs), spent))
    for ceiling in ceilings:
        if ceiling.committed >= ceiling.budget:
            return _refusal(kind, ceiling, peer, spend.day_start)
    shown = ceilings[0]
    return BudgetVerdict(
        allowed=True,
        kind=kind,
        exhausted="",
        spent_tokens=shown.committed,
        budget_tokens=shown.budget,
        room=min(ceiling.budget - ceiling.committed for ceiling in ceilings),
    )


def _admission_lock() -> None:
    """Serialise admissions until the transaction ends.

    PostgreSQL: an advisory transaction lock. SQLite: nothing to take — every transaction begins
    IMMEDIATE (hermes_site/settings.py), holding the database's write lock from its first statement.
    """
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [ADMISSION_LOCK_KEY])


def _rate_check(peer: PeerAllowance) -> None:
    assert peer.rate_limit
    now = timezone.now()
    recent = Turn.objects.filter(actor=peer.actor, started_at__gte=now - datetime.timedelta(seconds=peer.window))
    starts = list(recent.order_by("started_at").values_list("started_at", flat=True)[: peer.rate_limit])
    if len(starts) < peer.rate_limit:
        return
    retry_after = max(1, math.ceil((starts[0] + datetime.timedelta(seconds=peer.window) - now).total_seconds()))
    raise BudgetRefused(
        "rate_limited",
        f"Rate limit: at most {peer.rate_limit} questions from {peer.name} per {peer.window:g} s; "
        f"retry in {retry_after} s.",
        retry_after=retry_after,
    )


@dataclass(frozen=True)
class Admission:
    """What `turn_admit` needs to know of a turn about to be stored."""

    kind: BudgetKind
    turn_tokens: int
    reserve: bool | None = None
    peer: PeerAllowance | None = None

    def admit(self) -> int:
        return turn_admit(kind=self.kind, turn_tokens=self.turn_tokens, reserve=self.reserve, peer=self.peer)


def turn_admit(
    *, kind: BudgetKind, turn_tokens: int, reserve: bool | None = None, peer: PeerAllowance | None = None
) -> int:
    """Admit a turn and return its hold: `turn_tokens` shrunk to the room left under every ceiling
    (0 when no budget applies). Raises `BudgetRefused`.

    Call it inside the transaction that stores the turn with `tokens_reserved` set to the hold
    (agent/store/ `turn_begin`): the lock taken here lasts until that commit, so the next
    admission counts this turn's hold.
    """
    if not budget_limited(kind, peer):
        return 0
    assert connection.in_atomic_block, "turn_admit runs in the transaction that stores the turn"
    _admission_lock()
    if peer is not None and peer.rate_limit:
        _rate_check(peer)
    verdict = budget_check(kind=kind, reserve=reserve, peer=peer)
    if not verdict.allowed:
        raise BudgetRefused("budget_exhausted", verdict.message, retry_after=verdict.retry_after)
    # Only a rate applies (no budget): there is no room to hold.
    return 0 if verdict.room is None else min(turn_tokens, verdict.room)
