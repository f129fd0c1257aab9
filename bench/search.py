"""Search latency at scale: p50/p95 of `GET /search`'s query over a 1M-message history, on PostgreSQL.

Creates the database `<name>_searchbench` beside DATABASE_URL's (dropped at the end), migrates it,
fills it with `search_dataset.dataset_write` (COPY; 10,000 sessions x 10 turns x 10 messages = 1M
messages, 400k tool calls, ~700k search entries by default), then runs the product's own search
(`agent.search.query.search_run`, what the API and the control room call) for a mix of queries:
a rare term, a medium one, a common one (planted at 0.001 %, 1 % and 10 % of the entries), two
vocabulary words together, a phrase, and the common term narrowed by tool and by date. Each query
is run `--repeat` times after one warm-up run. Target: p95 ≤ 100 ms.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/hermes_search .venv/bin/python bench/search.py
    ... bench/search.py --sessions 1000   # 100k messages, for a quick look
    ... bench/search.py --keep; ... bench/search.py --reuse <the URL it printed>   # measure again

A measurement, not a test: it prints figures, and exits non-zero only when a query found nothing it
should have found.
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from search_dataset import MESSAGES_PER_TURN, PLANTED, dataset_write  # noqa: E402

from tests.fakes.daphne import LiveDatabase  # noqa: E402


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--turns-per-session", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--keep", action="store_true", help="keep the database (its URL is printed)")
    parser.add_argument("--reuse", metavar="URL", help="measure a database an earlier --keep run left")
    arguments = parser.parse_args()
    if not os.environ.get("DATABASE_URL", "").startswith(("postgres://", "postgresql://")):
        sys.exit("bench/search.py measures PostgreSQL's full-text search: set DATABASE_URL=postgres://...")

    if arguments.reuse:
        # A database kept by an earlier run (--keep): measure again without writing it again.
        database = LiveDatabase(arguments.reuse)
        os.environ["DATABASE_URL"] = database.url
        from harness import django_setup

        django_setup()
        planted = {
            term: database.query("SELECT count(*) FROM agent_search_entries WHERE document @@ to_tsquery(%s)", (term,))[
                0
            ][0]
            for term, _share in PLANTED.values()
        }
        try:
            return _measure(planted, repeat=arguments.repeat)
        finally:
            from django.db import connections

            connections.close_all()
    database = LiveDatabase.create(Path("/nonexistent"), name="searchbench")
    try:
        os.environ["DATABASE_URL"] = database.url
        from harness import django_setup

        django_setup()
        started = time.perf_counter()
        facts = dataset_write(database.url, sessions=arguments.sessions, turns_per_session=arguments.turns_per_session)
        print(
            f"dataset: {facts.sessions:,} sessions, {facts.turns:,} turns, {facts.messages:,} messages "
            f"({MESSAGES_PER_TURN} per turn), {facts.tool_calls:,} tool calls, {facts.entries:,} search entries; "
            f"written and indexed in {time.perf_counter() - started:.0f} s"
        )
        size = database.query("SELECT pg_size_pretty(pg_relation_size('agent_search_document_idx'))")[0][0]
        print(f"GIN index: {size}; planted terms (entries containing them): {facts.planted}")
        return _measure(facts.planted, repeat=arguments.repeat)
    finally:
        from django.db import connections

        connections.close_all()
        if arguments.keep:
            print(f"kept: {database.url}")
        else:
            database.drop()


def _measure(planted: dict[str, int], *, repeat: int) -> int:
    from agent.search.query import SearchFilters, search_run

    rare, medium, common = (PLANTED[name][0] for name in ("rare", "medium", "common"))
    from agent.models import SearchEntry

    last = SearchEntry.objects.order_by("-created_at").values_list("created_at", flat=True).first()
    recent = (last or datetime.datetime.now(tz=datetime.UTC)) - datetime.timedelta(days=30)
    queries = {
        f"rare term ({planted[rare]} entries)": SearchFilters(query=rare),
        f"medium term ({planted[medium]:,} entries)": SearchFilters(query=medium),
        f"common term ({planted[common]:,} entries)": SearchFilters(query=common),
        "two words (AND)": SearchFilters(query="postgres timeout"),
        "phrase": SearchFilters(query='"connection refused"'),
        "common term, one tool": SearchFilters(query=common, tool="tail_log"),
        "common term, last 30 days": SearchFilters(query=common, since=recent),
        "no match": SearchFilters(query="zzqxnotaword"),
    }
    failed = 0
    every: list[float] = []
    print(f"{'query':<34} {'hits':>5} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8}")
    for label, filters in queries.items():
        hits = search_run(filters)  # warm-up, and the hits to check
        if not hits and label != "no match" and not (filters.query == rare and not planted[rare]):
            print(f"{label}: found nothing", file=sys.stderr)
            failed += 1
        timings = []
        for _ in range(repeat):
            started = time.perf_counter()
            search_run(filters)
            timings.append((time.perf_counter() - started) * 1000)
        every += timings
        print(
            f"{label:<34} {len(hits):>5} {statistics.median(timings):>8.1f} {_percentile(timings, 0.95):>8.1f} "
            f"{max(timings):>8.1f}"
        )
    p95 = _percentile(every, 0.95)
    print(f"all queries: p50 {statistics.median(every):.1f} ms, p95 {p95:.1f} ms (target ≤ 100 ms)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
