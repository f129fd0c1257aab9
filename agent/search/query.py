"""Searching the index: ranked hits with highlighted snippets, narrowed by date, actor, origin, tool.

The database ranks and cuts the snippets (PostgreSQL: `websearch_to_tsquery`, `ts_rank_cd`,
`ts_headline`; SQLite: FTS5 `MATCH`, `bm25`, `snippet`), wrapping matches in control characters
that the indexed text never contains (`entries.HIGHLIGHT_START`/`STOP`). `snippet_html` escapes the
snippet and only then turns those markers into `<mark>`: the highlight is ours, never the content's.

An operator's query is words, "quoted phrases" and -excluded words, the same on both databases: on
SQLite it is rewritten into FTS5 syntax term by term (`fts5_query`), so no input is an FTS5 syntax
error.
"""

from __future__ import annotations

import datetime
import re
import uuid
from dataclasses import dataclass
from typing import Any

from django.db import connection
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from agent.models import SearchEntry
from agent.search.entries import HIGHLIGHT_START, HIGHLIGHT_STOP

QUERY_MAX_CHARS = 200
LIMIT_DEFAULT = 20
LIMIT_MAX = 100
# ts_headline reparses the text it is given: it is given this much of a long entry, so a page of
# hits costs the same whatever the tool results hold. A match further in is found and ranked; its
# snippet then shows the entry's beginning.
HEADLINE_CHARS = 20_000
# PostgreSQL ranks the newest this many matches: finding and ranking them reads each one's row, so
# a common term would take long to rank whole (docs/performance.md, "Search").
# Rare terms — what an incident search mostly is — are ranked among all their matches.
CANDIDATES_MAX = 200
_HEADLINE_OPTIONS = (
    f"StartSel={HIGHLIGHT_START}, StopSel={HIGHLIGHT_STOP}, MaxWords=28, MinWords=10, "
    'MaxFragments=2, FragmentDelimiter=" … "'
)


@dataclass(frozen=True)
class SearchFilters:
    query: str
    since: datetime.datetime | None = None
    # Exclusive: hits before this instant.
    until: datetime.datetime | None = None
    # The session's actor (who started it) and origin (ui, api, cli, ...).
    actor: str = ""
    origin: str = ""
    tool: str = ""
    limit: int = LIMIT_DEFAULT


@dataclass(frozen=True)
class SearchHit:
    session_id: uuid.UUID
    session_title: str
    actor: str
    origin: str
    turn_id: uuid.UUID | None
    kind: str
    server: str
    tool: str
    tool_use_id: str
    created_at: datetime.datetime
    rank: float
    # The snippet with `HIGHLIGHT_START`/`STOP` around matches, unescaped: see `snippet_html`.
    snippet: str

    @property
    def snippet_html(self) -> SafeString:
        return snippet_html(self.snippet)

    @property
    def kind_label(self) -> str:
        return str(SearchEntry.Kind(self.kind).label) if self.kind in SearchEntry.Kind.values else self.kind

    @property
    def snippet_plain(self) -> str:
        return self.snippet.replace(HIGHLIGHT_START, "").replace(HIGHLIGHT_STOP, "")


def snippet_html(snippet: str) -> SafeString:
    """The snippet escaped, with the database's match markers (and only those) as `<mark>`."""
    html = str(escape(snippet)).replace(HIGHLIGHT_START, "<mark>").replace(HIGHLIGHT_STOP, "</mark>")
    # A fragment cut inside a match leaves a marker unpaired: close it so nothing leaks past.
    if html.count("<mark>") > html.count("</mark>"):
        html += "</mark>"
    return mark_safe(html)  # escaped above: the only tags are the ones added here


def search_run(filters: SearchFilters) -> list[SearchHit]:
    """The best hits for `filters.query`, best first (ties: newest first); none for an empty query."""
    if not filters.query.strip():
        return []
    if connection.vendor == "postgresql":
        sql, params = _postgresql(filters)
    elif connection.vendor == "sqlite":
        match = fts5_query(filters.query)
        if not match:
            return []
        sql, params = _sqlite(filters, match)
    else:
        raise NotImplementedError(f"search needs PostgreSQL or SQLite, not {connection.vendor}")
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    return [_hit(row) for row in rows]


_COLUMNS = "e.session_id, s.title, s.actor, s.origin, e.turn_id, e.kind, e.server, e.tool, e.tool_use_id, e.created_at"


def _filters_sql(filters: SearchFilters) -> tuple[str, list[Any]]:
    clauses: list[str] = []
    params: list[Any] = []
    adapt = connection.ops.adapt_datetimefield_value
    if filters.since is not None:
        clauses.append("e.created_at >= %s")
        params.append(adapt(filters.since))
    if filters.until is not None:
        clauses.append("e.created_at < %s")
        params.append(adapt(filters.until))
    for column, value in (("s.actor", filters.actor), ("s.origin", filters.origin), ("e.tool", filters.tool)):
        if value:
            clauses.append(f"{column} = %s")
            params.append(value)
    return "".join(f" AND {clause}" for clause in clauses), params


def _postgresql(filters: SearchFilters) -> tuple[str, list[Any]]:
    """Three steps, each bounded: the newest `CANDIDATES_MAX` matches (the GIN index, or the primary
    key read backwards for a term in many entries), ranked, and only the page's snippets made."""
    where, params = _filters_sql(filters)
    sessions = "JOIN agent_sessions s ON s.id = e.session_id" if filters.actor or filters.origin else ""
    sql = f"""
        SELECT {_COLUMNS}, hit.rank, ts_headline('english', left(e.text, %s), hit.q, %s)
        FROM (
            SELECT candidate.id, candidate.q, ts_rank_cd(candidate.document, candidate.q) AS rank
            FROM (
                SELECT e.id, e.document, q
                FROM agent_search_entries e {sessions}, websearch_to_tsquery('english', %s) q
                WHERE e.document @@ q{where}
                ORDER BY e.id DESC
                LIMIT %s
            ) candidate
            ORDER BY rank DESC, candidate.id DESC
            LIMIT %s
        ) hit
        JOIN agent_search_entries e ON e.id = hit.id
        JOIN agent_sessions s ON s.id = e.session_id
        ORDER BY hit.rank DESC, e.id DESC
    """  # `where` names fixed columns only; values are parameters
    return sql, [HEADLINE_CHARS, _HEADLINE_OPTIONS, filters.query, *params, CANDIDATES_MAX, filters.limit]


def _sqlite(filters: SearchFilters, match: str) -> tuple[str, list[Any]]:
    where, params = _filters_sql(filters)
    sql = f"""
        SELECT {_COLUMNS}, bm25(agent_search_fts) AS rank,
               snippet(agent_search_fts, 0, char(2), char(3), ' … ', 24)
        FROM agent_search_fts
        JOIN agent_search_entries e ON e.id = agent_search_fts.rowid
        JOIN agent_sessions s ON s.id = e.session_id
        WHERE agent_search_fts MATCH %s{where}
        ORDER BY rank, e.id DESC
        LIMIT %s
    """  # `where` names fixed columns only; values are parameters
    return sql, [match, *params, filters.limit]


def _hit(row: tuple[Any, ...]) -> SearchHit:
    session_id, title, actor, origin, turn_id, kind, server, tool, tool_use_id, created_at, rank, snippet = row
    return SearchHit(
        session_id=_uuid(session_id),
        session_title=title or "Untitled session",
        actor=actor,
        origin=origin,
        turn_id=_uuid(turn_id) if turn_id else None,
        kind=kind,
        server=server,
        tool=tool,
        tool_use_id=tool_use_id,
        created_at=_datetime(created_at),
        # bm25 is lower-is-better; shown as higher-is-better like PostgreSQL's rank.
        rank=float(rank) if connection.vendor == "postgresql" else -float(rank),
        snippet=snippet or "",
    )


def _datetime(value: Any) -> datetime.datetime:
    """SQLite hands raw SQL its datetimes as naive UTC text; PostgreSQL as aware datetimes."""
    if isinstance(value, datetime.datetime):
        return value if timezone.is_aware(value) else value.replace(tzinfo=datetime.UTC)
    parsed = parse_datetime(str(value))
    if parsed is None:
        raise ValueError(f"not a datetime: {value!r}")
    return parsed if timezone.is_aware(parsed) else parsed.replace(tzinfo=datetime.UTC)


def _uuid(value: Any) -> uuid.UUID:
    return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))


_TERM = re.compile(r'(-?)"([^"]*)"|(-?)([^\s"]+)')
_WORD = re.compile(r"\w+")


def fts5_query(query: str) -> str:
    """An operator's query in FTS5 syntax: every term quoted (so no character is FTS5 syntax), all
    terms required, "phrases" kept whole, -terms excluded. Empty when nothing is left to match."""
    wanted: list[str] = []
    unwanted: list[str] = []
    for match in _TERM.finditer(query[:QUERY_MAX_CHARS]):
        negated = bool(match.group(1) or match.group(3))
        words = _WORD.findall(match.group(2) if match.group(2) is not None else match.group(4))
        if not words:
            continue
        term = '"' + " ".join(words) + '"'
        (unwanted if negated else wanted).append(term)
    if not wanted:
        return ""
    return " ".join(wanted) + "".join(f" NOT {term}" for term in unwanted)
