"""A large, realistic history written straight into Hermes's tables with COPY, for `bench/search.py`.

`dataset_write(url, ...)` fills a migrated PostgreSQL database with sessions of turns shaped like
real ones — a question, tool calls (assistant `tool_use` + user `tool_result` messages, each with
its ledger row) and an answer — and with their search entries, built by the product's own text
functions (`agent.search.entries`), so the index holds what the write path would have written.

Words come from a Zipf-distributed vocabulary (a few words are in most texts, most words in few),
and a handful of marker terms are planted at known frequencies, so a benchmark can ask for a rare,
a medium and a common term and know how many entries each matches.

Swappable: anything that fills the tables the same way (e.g. a shared scale dataset) serves the
benchmark, followed by `manage.py search_reindex` when it writes no search entries itself.
"""

from __future__ import annotations

import datetime
import json
import random
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any

import psycopg

MESSAGES_PER_TURN = 10  # question, 4 x (tool_use, tool_result), answer
TOOLS_PER_TURN = 4
TOOLS = [
    "get_health_summary", "get_blast_radius", "get_entity", "tail_log", "get_service_status",
    "query_metrics", "get_change_history", "search_knowledge", "get_lxc_state", "get_execution",
]  # fmt: skip
SERVICES = [
    "postgres", "caddy", "authentik", "immich", "nextcloud", "jellyfin", "grafana", "prometheus",
    "redis", "minio", "gitea", "vaultwarden", "paperless", "homeassistant", "mosquitto", "pihole",
]  # fmt: skip
OPS_WORDS = [
    "restart", "deploy", "health", "degraded", "latency", "error", "timeout", "disk", "memory", "cpu",
    "backup", "snapshot", "replica", "certificate", "renew", "proxy", "upstream", "connection", "refused",
    "queue", "worker", "cron", "volume", "mount", "network", "dns", "route", "firewall", "container",
    "image", "pull", "rollout", "config", "reload", "log", "warning", "critical", "ok", "failed",
    "succeeded", "pending", "approval", "execution", "target", "depends", "dependants", "host", "lxc",
    "node", "cluster", "storage",
]  # fmt: skip
# Planted terms: (term, share of the entries that contain it).
PLANTED = {"rare": ("walarchivefail", 0.00001), "medium": ("checkpointstall", 0.01), "common": ("fleetwide", 0.10)}


@dataclass
class DatasetFacts:
    sessions: int = 0
    turns: int = 0
    messages: int = 0
    tool_calls: int = 0
    entries: int = 0
    # Planted term → how many entries contain it.
    planted: dict[str, int] = field(default_factory=dict)


class _Words:
    def __init__(self, rng: random.Random) -> None:
        synthetic = [f"{a}{b}" for a in ("ka", "lo", "mi", "ne", "ru", "sa", "to", "vi") for b in range(250)]
        self.vocabulary = OPS_WORDS + SERVICES + synthetic
        self.cumulative = list(accumulate(1 / (rank + 1) for rank in range(len(self.vocabulary))))
        self.rng = rng

    def sentence(self, count: int) -> str:
        return " ".join(self.rng.choices(self.vocabulary, cum_weights=self.cumulative, k=count))


def _copy_text(value: Any) -> str:
    """A value in COPY's text format."""
    if value is None:
        return "\\N"
    if isinstance(value, bool):
        return "t" if value else "f"
    text = value if isinstance(value, str) else str(value)
    return text.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


def _lines(rows: list[tuple[Any, ...]]) -> str:
    return "".join("\t".join(_copy_text(value) for value in row) + "\n" for row in rows)


class _Batch:
    """The rows of a batch of sessions, table by table, as the product would have written them."""

    def __init__(self, words: _Words, facts: DatasetFacts, ids: dict[str, int]) -> None:
        from agent.search.entries import message_text, searchable, tool_call_text, tool_result_text

        self.words, self.rng, self.facts, self.ids = words, words.rng, facts, ids
        self.message_text, self.searchable = message_text, searchable
        self.tool_call_text, self.tool_result_text = tool_call_text, tool_result_text
        self.tables: dict[str, list[tuple[Any, ...]]] = {table: [] for table in _COLUMNS}

    def planted(self) -> str:
        found = [term for term, share in PLANTED.values() if self.rng.random() < share]
        for term in found:
            self.facts.planted[term] += 1
        return " ".join(found)

    def session(self, at: datetime.datetime, turns: int) -> None:
        session_id = uuid.uuid4()
        actor = f"operator:{self.rng.choice(['alice', 'bob', 'carol'])}"
        origin = self.rng.choice(["ui", "api", "cli", "signal"])
        self.tables["agent_sessions"].append((session_id, self.words.sentence(6), actor, origin, "", at, at, 0, 0, 0))
        for index in range(turns):
            self.turn(session_id, actor, at + datetime.timedelta(minutes=index * 4))

    def turn(self, session_id: uuid.UUID, actor: str, at: datetime.datetime) -> None:
        turn_id = uuid.uuid4()
        usage = json.dumps({"input_tokens": 1200, "output_tokens": 300})
        finished = at + datetime.timedelta(seconds=20)
        self.tables["agent_turns"].append(
            (turn_id, session_id, actor, "done", "end_turn", "", "claude-sonnet-5", usage, 1500, 5, at, finished)
        )
        question = f"{self.words.sentence(self.rng.randint(6, 16))} {self.planted()}".strip()
        self.message(session_id, turn_id, "user", [{"type": "text", "text": question}], at, kind="question")
        for call in range(TOOLS_PER_TURN):
            self.tool_call(session_id, turn_id, actor, at + datetime.timedelta(seconds=2 + call * 3), preface=call == 0)
        answer = f"{self.words.sentence(self.rng.randint(20, 60))} {self.planted()}".strip()
        self.message(session_id, turn_id, "assistant", [{"type": "text", "text": answer}], finished, kind="answer")

    def message(
        self, session_id: uuid.UUID, turn_id: uuid.UUID, role: str, blocks: list[dict[str, Any]],
        at: datetime.datetime, *, kind: str = "",
    ) -> None:  # fmt: skip
        self.ids["message"] += 1
        message_id = self.ids["message"]
        self.tables["agent_messages"].append((message_id, session_id, turn_id, role, json.dumps(blocks), "", at))
        text = self.message_text(blocks)
        if kind and text:
            self.tables["agent_search_entries"].append(
                (session_id, turn_id, message_id, None, kind, "", "", "", self.searchable(text), at)
            )

    def tool_call(
        self, session_id: uuid.UUID, turn_id: uuid.UUID, actor: str, at: datetime.datetime, *, preface: bool
    ) -> None:
        tool = self.rng.choice(TOOLS)
        tool_use_id = f"toolu_{uuid.uuid4().hex[:24]}"
        arguments = {"slug": f"service:{self.rng.choice(SERVICES)}"}
        blocks: list[dict[str, Any]] = [
            {"type": "tool_use", "id": tool_use_id, "name": f"mcp__oikos__{tool}", "input": arguments}
        ]
        if preface:
            blocks.insert(0, {"type": "text", "text": self.words.sentence(self.rng.randint(5, 12))})
        self.message(session_id, turn_id, "assistant", blocks, at, kind="answer")
        output = f"{self.words.sentence(self.rng.randint(30, 90))} {self.planted()}".strip()
        result = {"content": [{"type": "text", "text": output}], "is_error": False}
        self.ids["activity"] += 1
        activity_id = self.ids["activity"]
        self.tables["agent_activity"].append(
            (activity_id, turn_id, session_id, actor, tool_use_id, "oikos", tool, json.dumps(arguments),
             json.dumps(result), "ok", False, self.rng.randint(5, 900), at)
        )  # fmt: skip
        text = f"{self.tool_call_text(tool=tool, arguments=arguments)}\n{self.tool_result_text(result)}"
        self.tables["agent_search_entries"].append(
            (session_id, turn_id, None, activity_id, "tool", "oikos", tool, tool_use_id, self.searchable(text), at)
        )
        blocks = [{"type": "tool_result", "tool_use_id": tool_use_id, "content": output}]
        self.message(session_id, turn_id, "user", blocks, at)


def dataset_write(url: str, *, sessions: int, turns_per_session: int, seed: int = 19) -> DatasetFacts:
    """Fill the migrated database at `url` (empty Hermes tables; Django set up) with `sessions` sessions."""
    words = _Words(random.Random(seed))
    facts = DatasetFacts(planted=dict.fromkeys((term for term, _share in PLANTED.values()), 0))
    ids = {"message": 0, "activity": 0}
    start = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    with psycopg.connect(url, autocommit=False) as connection:
        # The full-text column and its index are built once at the end: far faster than row by row.
        connection.execute("DROP INDEX IF EXISTS agent_search_document_idx")
        connection.execute("ALTER TABLE agent_search_entries DROP COLUMN IF EXISTS document")
        for batch in _batches(sessions, 200):
            rows = _Batch(words, facts, ids)
            for index in batch:
                rows.session(start + datetime.timedelta(minutes=index * 50), turns_per_session)
            for table, columns in _COLUMNS.items():
                with connection.cursor().copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
                    copy.write(_lines(rows.tables[table]))
            # Django's foreign keys are checked at commit: a batch at a time keeps that queue short.
            connection.commit()
            facts.sessions += len(rows.tables["agent_sessions"])
            facts.turns += len(rows.tables["agent_turns"])
            facts.messages += len(rows.tables["agent_messages"])
            facts.tool_calls += len(rows.tables["agent_activity"])
            facts.entries += len(rows.tables["agent_search_entries"])
        for table in ("agent_messages", "agent_activity"):
            connection.execute(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), (SELECT max(id) FROM {table}))")
        connection.execute(
            "ALTER TABLE agent_search_entries ADD COLUMN document tsvector"
            " GENERATED ALWAYS AS (to_tsvector('english', text)) STORED"
        )
        connection.execute("CREATE INDEX agent_search_document_idx ON agent_search_entries USING gin (document)")
        connection.commit()
        connection.autocommit = True
        connection.execute("VACUUM ANALYZE")
    return facts


_COLUMNS = {
    "agent_sessions": "id, title, actor, origin, model, created_at, last_active_at, context_tokens, context_window,"
    " compactions",
    "agent_turns": "id, session_id, actor, status, stop_reason, error, model, usage, tokens_total, iterations,"
    " started_at, finished_at",
    "agent_messages": "id, session_id, turn_id, role, content, kind, created_at",
    "agent_activity": "id, correlation_id, session_id, actor, tool_use_id, server, tool, arguments, result, state,"
    " is_error, duration_ms, started_at",
    "agent_search_entries": "session_id, turn_id, message_id, activity_id, kind, server, tool, tool_use_id, text,"
    " created_at",
}


def _batches(total: int, size: int) -> Iterator[range]:
    for first in range(0, total, size):
        yield range(first, min(first + size, total))
