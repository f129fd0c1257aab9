"""A months-old Hermes, built in a fresh PostgreSQL database: the scale benchmarks' dataset.

`dataset_database` creates `<name>_scale` beside the database `DATABASE_URL` names (so whatever
was in that one is never touched), points `DATABASE_URL` at it and drops it afterwards;
`dataset_build` fills it — by default 10k sessions, 1M messages and 200k ledger rows — and returns
what a benchmark needs to aim at (the long session, a title to search for, ...).

Shapes follow what Hermes writes (`agent.store`, `agent.engine`): a turn is the question, then
per tool iteration an assistant message with its `tool_use` blocks (one, sometimes two in parallel)
and a user message of `tool_result`s (text of a few hundred to a few thousand characters, stored in
full in the ledger row too), then the answer; a compacting turn also holds a `summary` message.
Session sizes are heavy-tailed (most a few turns, some hundreds) plus one session with thousands of
messages; actors, origins, models and error rates vary; dates spread over six months, and message
ids follow time across sessions, as they do when turns interleave.

Rows go in by `COPY` (psycopg), in the columns Django's models declare: a column this module does
not fill gets its field's default, so a field added later needs no change here unless it matters.
Messages are interleaved across sessions by time, which is what makes a long session's rows land
on many pages of the table (the read a real one pays for).
"""

from __future__ import annotations

import datetime
import itertools
import json
import os
import random
import time
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal
from typing import Any
from urllib.parse import urlsplit, urlunsplit

SESSIONS = 10_000
MESSAGES = 1_000_000
LEDGER_ROWS = 200_000
# The long session: how many turns it has (its messages are about three times as many).
LONG_SESSION_TURNS = 1_500
# Of the tool iterations, how many ran two tools in parallel (each is one more ledger row).
PARALLEL_SHARE = 0.1
DAYS = 180

ACTORS = ["alice", "bob", "carol", "dmitri", "agent:hermes", "peer:garra"]
ORIGINS = ["ui", "ui", "ui", "api", "cli", "mcp", "a2a"]
MODELS = ["claude-sonnet-5", "claude-sonnet-5", "claude-haiku-5", "claude-opus-5"]
TOPICS = [
    "caddy",
    "jellyfin",
    "postgres",
    "sonarr",
    "radarr",
    "home-assistant",
    "grafana",
    "prometheus",
    "nextcloud",
    "vaultwarden",
    "pihole",
    "immich",
    "paperless",
    "gitea",
    "minio",
    "zigbee2mqtt",
]
QUESTIONS = [
    "what's degraded and what depends on {t}?",
    "why is {t} slow since this morning?",
    "restart {t}",
    "show me the last errors of {t}",
    "what changed on the host running {t} this week?",
    "is {t} healthy after the upgrade?",
    "deploy the new config of {t}",
    "which services share a disk with {t}?",
]
TOOLS = [
    ("oikos", "get_health_summary"),
    ("oikos", "get_blast_radius"),
    ("oikos", "get_entity"),
    ("oikos", "list_entities"),
    ("oikos", "get_relations"),
    ("oikos", "tail_log"),
    ("oikos", "get_service_status"),
    ("oikos", "query_metrics"),
    ("oikos", "get_change_history"),
    ("oikos", "search_knowledge"),
    ("oikos", "get_event_timeline"),
    ("garra", "read_file"),
    ("garra", "run_check"),
]
LOG_LINE = "2026-{m:02d}-{d:02d}T{h:02d}:{mi:02d}:07Z {t}[{pid}]: {level} {msg}\n"
LOG_MESSAGES = [
    "upstream timed out (110: Connection timed out) while reading response header",
    "GET /api/health 200 12ms",
    "checkpoint complete: wrote 1832 buffers (11.2%)",
    "worker 3 restarted after 2 failures",
    "certificate renewal scheduled in 29 days",
    "slow query: 2312 ms SELECT * FROM episodes WHERE series_id = $1",
]


@dataclass(frozen=True)
class Dataset:
    """What a benchmark aims at in the built data."""

    sessions: int
    turns: int
    messages: int
    ledger_rows: int
    long_session_id: uuid.UUID
    long_session_messages: int
    # A word that appears in some titles (a search that finds a handful of sessions).
    search_term: str
    # A turn of the long session (the ledger filtered by correlation id).
    long_session_turn_id: uuid.UUID
    build_seconds: float


def scale_database_url(url: str, *, suffix: str = "_scale") -> str:
    """The URL of `<name><suffix>` on the server `url` points at."""
    parts = urlsplit(url)
    name = parts.path.lstrip("/") or "postgres"
    return urlunsplit(parts._replace(path="/" + name + suffix))


@contextmanager
def dataset_database(url: str, *, keep: bool = False, reuse: bool = False) -> Iterator[str]:
    """A fresh, empty database beside `url`'s (dropped first if a previous run left it), as a URL.

    Sets `DATABASE_URL` to it for the Django set-up that follows; drops it on the way out unless
    `keep`. `reuse`: the database a `keep` run left, as it is (the set-up migrates it forward).
    Django's connections must be closed by then (`django.db.connections.close_all()`).
    """
    import psycopg

    if not url.startswith(("postgres://", "postgresql://")):
        raise SystemExit(f"The scale dataset needs PostgreSQL: DATABASE_URL is {url.split(':', 1)[0]!r}.")
    target = scale_database_url(url)
    name = urlsplit(target).path.lstrip("/")
    # The server's maintenance database: `url`'s own need not exist.
    maintenance = urlunsplit(urlsplit(url)._replace(path="/postgres"))
    with psycopg.connect(maintenance, autocommit=True) as admin:
        exists = admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if reuse and not exists:
            raise SystemExit(f"There is no database {name} to reuse: run once with --keep.")
        if not reuse:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            admin.execute(f'CREATE DATABASE "{name}"')
    os.environ["DATABASE_URL"] = target
    try:
        yield target
    finally:
        if keep:
            print(f"kept database {name} ({target})")
        else:
            with psycopg.connect(maintenance, autocommit=True) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def dataset_describe() -> Dataset:
    """What `dataset_build` returned, read back from a database it filled (for `--reuse`)."""
    from django.db.models import Count

    from agent.models import Activity, AgentSession, Message, Turn

    longest = AgentSession.objects.annotate(n=Count("turns")).order_by("-n").values_list("id", "n").first()
    if longest is None:
        raise SystemExit("The database holds no sessions: it is not a scale dataset.")
    long_turns = Turn.objects.filter(session_id=longest[0]).order_by("started_at").values_list("id", flat=True)
    return Dataset(
        sessions=AgentSession.objects.count(),
        turns=Turn.objects.count(),
        messages=Message.objects.count(),
        ledger_rows=Activity.objects.count(),
        long_session_id=longest[0],
        long_session_messages=Message.objects.filter(session_id=longest[0]).count(),
        search_term="vaultwarden",
        long_session_turn_id=long_turns[longest[1] // 2],
        build_seconds=0.0,
    )


@dataclass
class _Turn:
    session: int
    at: datetime.datetime
    iterations: int = 0
    summary: bool = False


def dataset_build(
    *,
    sessions: int = SESSIONS,
    messages: int = MESSAGES,
    ledger_rows: int = LEDGER_ROWS,
    long_session_turns: int = LONG_SESSION_TURNS,
    seed: int = 15,
) -> Dataset:
    """Fill Hermes's (migrated, empty) tables on the default connection; the counts are exact.

    A turn has `2 + 2 * iterations` messages (one more when it compacted), an iteration one ledger
    row (two when parallel): the turn and iteration counts follow from the three totals.
    """
    from django.db import connection

    started = time.perf_counter()
    rng = random.Random(seed)
    now = datetime.datetime.now(datetime.UTC).replace(microsecond=0)
    # ledger = iterations + parallel; messages = 2 * turns + 2 * iterations + summaries.
    parallel = round(ledger_rows * PARALLEL_SHARE / (1 + PARALLEL_SHARE))
    iterations = ledger_rows - parallel
    # The long session compacted every 300 turns; one summary fewer when the rest must be even.
    summaries = long_session_turns // 300
    summaries -= (messages - summaries) % 2
    turn_count = (messages - 2 * iterations - summaries) // 2
    if turn_count < sessions + long_session_turns:
        raise ValueError("Too few messages for that many sessions and ledger rows.")

    turns = _turns_plan(rng, now=now, sessions=sessions, turn_count=turn_count, long_turns=long_session_turns)
    for index in rng.choices(range(len(turns)), k=iterations):
        turns[index].iterations += 1
    long_turns = [turn for turn in turns if turn.session == 0]
    for turn in long_turns[299::300][:summaries]:
        turn.summary = True
    # Turns of one session do not overlap, and message ids follow time across sessions.
    turns.sort(key=lambda turn: turn.at)
    parallel_at = set(rng.sample(range(iterations), parallel))

    session_ids = [uuid.UUID(int=rng.getrandbits(128), version=4) for _ in range(sessions)]
    titles: list[str] = []
    with connection.cursor() as cursor:
        raw = cursor.connection
        session_rows = _session_rows(rng, session_ids, turns, titles)
        _copy(raw, "agent", "AgentSession", session_rows)
        counts = _copy_turns(raw, rng, session_ids, turns, parallel_at, titles)
        _copy(raw, "watch", "Investigation", _investigation_rows(rng, session_ids, turns))
        cursor.execute("SELECT setval(pg_get_serial_sequence('agent_messages', 'id'), %s)", [counts["messages"]])
        cursor.execute("SELECT setval(pg_get_serial_sequence('agent_activity', 'id'), %s)", [counts["ledger"]])
        cursor.execute("ANALYZE")
    long_turn = long_turns[len(long_turns) // 2]
    return Dataset(
        sessions=sessions,
        turns=len(turns),
        messages=counts["messages"],
        ledger_rows=counts["ledger"],
        long_session_id=session_ids[0],
        long_session_messages=counts["long_messages"],
        search_term="vaultwarden",
        long_session_turn_id=counts["turn_ids"][id(long_turn)],
        build_seconds=time.perf_counter() - started,
    )


def _turns_plan(
    rng: random.Random, *, now: datetime.datetime, sessions: int, turn_count: int, long_turns: int
) -> list[_Turn]:
    """When each session's turns were asked: a heavy-tailed number per session, minutes to days apart."""
    weights = [rng.lognormvariate(0, 1.3) for _ in range(sessions - 1)]
    rest = turn_count - long_turns - (sessions - 1)
    scale = rest / sum(weights)
    sizes = [long_turns] + [1 + int(weight * scale) for weight in weights]
    # Rounding down left some turns over: the largest sessions take them.
    for index in sorted(range(1, sessions), key=lambda i: -weights[i - 1])[: turn_count - sum(sizes)]:
        sizes[index] += 1
    turns: list[_Turn] = []
    for session, size in enumerate(sizes):
        span = DAYS * 86_400 if session == 0 else rng.uniform(60, min(DAYS, 1 + size) * 86_400 / 4)
        start = now - datetime.timedelta(seconds=rng.uniform(span, DAYS * 86_400))
        offsets = sorted(rng.uniform(0, span) for _ in range(size))
        turns.extend(_Turn(session=session, at=start + datetime.timedelta(seconds=off)) for off in offsets)
    return turns


def _session_rows(
    rng: random.Random, session_ids: list[uuid.UUID], turns: list[_Turn], titles: list[str]
) -> Iterator[dict[str, Any]]:
    first: dict[int, datetime.datetime] = {}
    last: dict[int, datetime.datetime] = {}
    for turn in turns:
        first.setdefault(turn.session, turn.at)
        last[turn.session] = turn.at
    for index, session_id in enumerate(session_ids):
        topic = rng.choice(TOPICS)
        title = rng.choice(QUESTIONS).format(t=topic)
        titles.append(title)
        origin = "signal" if index % 40 == 1 else rng.choice(ORIGINS)
        yield {
            "id": session_id,
            "title": title[:200],
            "actor": "agent:hermes" if origin == "signal" else rng.choice(ACTORS[:4]),
            "origin": origin,
            "model": rng.choice(["", "", "", "claude-opus-5"]),
            "created_at": first[index],
            "last_active_at": last[index] + datetime.timedelta(seconds=40),
            "context_tokens": rng.randint(2_000, 150_000),
            "context_window": 200_000,
            "compactions": 5 if index == 0 else 0,
        }


def _copy_turns(
    raw: Any,
    rng: random.Random,
    session_ids: list[uuid.UUID],
    turns: list[_Turn],
    parallel_at: set[int],
    titles: list[str],
) -> dict[str, Any]:
    """Turns, their messages and their ledger rows, in one pass over the turns in time order."""
    turn_ids: dict[int, uuid.UUID] = {}
    message_rows: list[dict[str, Any]] = []
    ledger_rows: list[dict[str, Any]] = []
    counts: dict[str, Any] = {"messages": 0, "ledger": 0, "long_messages": 0, "turn_ids": turn_ids}
    results = _result_texts(rng)
    iteration = 0
    last_message_of: dict[int, int] = {}

    def turn_rows() -> Iterator[dict[str, Any]]:
        nonlocal iteration
        for turn in turns:
            turn_id = uuid.UUID(int=rng.getrandbits(128), version=4)
            turn_ids[id(turn)] = turn_id
            session_id = session_ids[turn.session]
            actor = "agent:hermes" if turn.session % 40 == 1 else ACTORS[turn.session % 4]
            topic = titles[turn.session].rsplit(" ", 1)[-1].strip("?") if rng.random() < 0.5 else rng.choice(TOPICS)
            at = turn.at
            before = len(message_rows)

            def message(
                role: str,
                content: list[dict[str, Any]],
                session_id: uuid.UUID = session_id,
                turn_id: uuid.UUID = turn_id,
                **extra: Any,
            ) -> None:
                nonlocal at
                counts["messages"] += 1
                at += datetime.timedelta(milliseconds=rng.randint(300, 9_000))
                message_rows.append(
                    {
                        "id": counts["messages"],
                        "session_id": session_id,
                        "turn_id": turn_id,
                        "role": role,
                        "content": json.dumps(content),
                        "created_at": at,
                        **extra,
                    }
                )

            message("user", [{"type": "text", "text": rng.choice(QUESTIONS).format(t=topic)}])
            if turn.summary:
                summary = "Summary of the conversation so far: " + " ".join(rng.choices(results, k=2))[:3000]
                message(
                    "user",
                    [{"type": "text", "text": summary}],
                    kind="summary",
                    replaces_through=last_message_of[turn.session],
                )
            for _ in range(turn.iterations):
                calls = 2 if iteration in parallel_at else 1
                iteration += 1
                uses = []
                for _call in range(calls):
                    server, tool = rng.choice(TOOLS)
                    uses.append(
                        {
                            "type": "tool_use",
                            "id": f"toolu_{rng.getrandbits(64):016x}",
                            "name": f"mcp__{server}__{tool}",
                            "input": {"slug": f"service:{topic}", "limit": rng.choice([20, 50, 100])},
                        }
                    )
                message("assistant", [{"type": "text", "text": f"Let me look at {topic}."}, *uses])
                call_at = at
                blocks = []
                for use in uses:
                    text = rng.choice(results)
                    state = rng.choices(["ok", "error", "unknown"], weights=[96, 3, 1])[0]
                    duration = rng.randint(5, 4_000)
                    counts["ledger"] += 1
                    _server, _, tool_name = str(use["name"]).removeprefix("mcp__").partition("__")
                    ledger_rows.append(
                        {
                            "id": counts["ledger"],
                            "correlation_id": turn_id,
                            "session_id": session_id,
                            "actor": actor,
                            "tool_use_id": use["id"],
                            "server": _server,
                            "tool": tool_name,
                            "arguments": json.dumps(use["input"]),
                            "result": json.dumps(
                                {"content": [{"type": "text", "text": text}], "is_error": state != "ok"}
                            ),
                            "state": state,
                            "is_error": state != "ok",
                            "duration_ms": duration,
                            "started_at": call_at,
                        }
                    )
                    blocks.append(
                        {
                            "type": "tool_result",
                            "tool_use_id": use["id"],
                            "content": [{"type": "text", "text": text}],
                            "is_error": state != "ok",
                        }
                    )
                message("user", blocks)
            answer = f"**{topic}** is {rng.choice(['healthy', 'degraded', 'restarting'])}.\n\n" + "\n".join(
                f"- {line}" for line in rng.sample(LOG_MESSAGES, 3)
            )
            message("assistant", [{"type": "text", "text": answer}])
            last_message_of[turn.session] = counts["messages"]
            if turn.session == 0:
                counts["long_messages"] += len(message_rows) - before
            status = rng.choices(["done", "error", "cancelled", "interrupted"], weights=[95, 2, 2, 1])[0]
            input_tokens = rng.randint(2_000, 60_000)
            output_tokens = rng.randint(100, 2_000)
            yield {
                "id": turn_id,
                "session_id": session_id,
                "actor": actor,
                "status": status,
                "stop_reason": "end_turn" if status == "done" else "",
                "error": "" if status == "done" else "The model server answered 529 (overloaded).",
                "model": rng.choice(MODELS),
                "usage": json.dumps(
                    {
                        "input_tokens": input_tokens,
                        "output_tokens": output_tokens,
                        "cache_read_input_tokens": input_tokens // 2,
                        "cache_creation_input_tokens": 0,
                    }
                ),
                "tokens_total": input_tokens + output_tokens + input_tokens // 2,
                "cost_usd": Decimal(input_tokens * 3 + output_tokens * 15) / Decimal(1_000_000),
                "iterations": turn.iterations + 1,
                "started_at": turn.at,
                "heartbeat_at": at,
                "finished_at": at,
            }

    _copy(raw, "agent", "Turn", turn_rows())
    _copy(raw, "agent", "Message", message_rows)
    _copy(raw, "agent", "Activity", ledger_rows)
    return counts


def _investigation_rows(
    rng: random.Random, session_ids: list[uuid.UUID], turns: list[_Turn]
) -> Iterator[dict[str, Any]]:
    opened: dict[int, datetime.datetime] = {}
    for turn in turns:
        opened.setdefault(turn.session, turn.at)
    for index in range(1, len(session_ids), 40):
        topic = rng.choice(TOPICS)
        yield {
            "session_id": session_ids[index],
            "entity": f"service:{topic}",
            "kind": "http_timeout",
            "severity": "warning",
            "title": f"{topic} is timing out",
            "state": rng.choice(["open", "resolved", "resolved", "skipped"]),
            "fired_count": rng.randint(1, 6),
            "first_event_id": str(index),
            "event": json.dumps(
                {"type": "signal.fired", "entity": f"service:{topic}", "at": opened[index].isoformat()}
            ),
            "escalation": json.dumps({"summary": f"{topic} timed out", "evidence": []}),
            "opened_at": opened[index],
            "last_fired_at": opened[index],
        }


def _result_texts(rng: random.Random) -> list[str]:
    """Tool results as tools answer them: log tails, JSON, from a line to a few kilobytes."""
    texts = []
    for _ in range(400):
        lines = rng.choice([1, 3, 8, 20, 40])
        texts.append(
            "".join(
                LOG_LINE.format(
                    m=rng.randint(1, 12),
                    d=rng.randint(1, 28),
                    h=rng.randint(0, 23),
                    mi=rng.randint(0, 59),
                    t=rng.choice(TOPICS),
                    pid=rng.randint(100, 9999),
                    level=rng.choice(["INFO", "WARN", "ERROR"]),
                    msg=rng.choice(LOG_MESSAGES),
                )
                for _ in range(lines)
            )
        )
    return texts


def _copy(raw: Any, app: str, model_name: str, rows: Iterable[dict[str, Any]]) -> None:
    """COPY `rows` into the model's table; columns a row leaves out get the field's default."""
    from django.apps import apps

    model = apps.get_model(app, model_name)
    iterator = iter(rows)
    first = next(iterator, None)
    if first is None:
        return
    # An id is written when the rows carry one (ids follow time); else the sequence gives it.
    fields = [field for field in model._meta.concrete_fields if not (field.primary_key and "id" not in first)]
    defaults: dict[str, Any] = {}
    for field in fields:
        value = field.get_default()
        defaults[field.attname] = json.dumps(value) if isinstance(value, dict | list) else value
    names = [field.attname for field in fields]
    columns = ", ".join(field.column for field in fields)
    with raw.cursor() as cursor, cursor.copy(f"COPY {model._meta.db_table} ({columns}) FROM STDIN") as copy:
        for row in itertools.chain([first], iterator):
            copy.write_row([row[name] if name in row else defaults[name] for name in names])
