"""Hermes at scale: server time of the pages an operator opens, at 10k sessions and 1M messages.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/hermes python bench/scale.py [--runs 40] [--keep]

Builds the dataset (`bench/dataset.py`) in a fresh database `<name>_scale` beside `DATABASE_URL`'s,
then requests each page `--runs` times and prints p50/p95 against the target (≤ 50 ms p95).

Server time is the time Django takes to answer, measured around `django.test.Client` requests:
every middleware, the view, its queries and the template rendering, as `runserver` or Daphne would
run them, without the network or the ASGI server (the same for every page, and not what this
benchmark is about). Async views run through the WSGI handler's `async_to_sync`, as sync views run
through `sync_to_async` under Daphne. Each page also gets its query count (one request's), the
first thing to look at when a figure is high.

One browser session (cookie) makes every request, as one operator would: once it has opened the
long session, the pages after it (search, ledger) carry that session in their chat drawer — the
worst case, and the common one. Rendered Markdown is cached per process (common.markdown):
"first view" clears that cache before each request.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

from harness import django_setup

TARGET_MS = 50.0


@dataclass(frozen=True)
class Figure:
    name: str
    path: str
    p50_ms: float
    p95_ms: float
    # This process's CPU time (every thread's) per request: what contention on a shared machine
    # does not inflate, and close to the wall time of an idle one (the queries are index reads).
    cpu_p50_ms: float
    cpu_p95_ms: float
    queries: int
    size_kb: float


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=40, help="requests per page (after 3 to warm up)")
    parser.add_argument("--keep", action="store_true", help="keep the <name>_scale database afterwards")
    parser.add_argument("--reuse", action="store_true", help="measure the database a --keep run left (migrated)")
    parser.add_argument("--sessions", type=int, default=None, help="sessions (default 10k)")
    parser.add_argument("--messages", type=int, default=None, help="messages (default 1M)")
    parser.add_argument("--ledger", type=int, default=None, help="ledger rows (default 200k)")
    args = parser.parse_args()
    url = os.environ.get("DATABASE_URL", "")
    import dataset

    with dataset.dataset_database(url, keep=args.keep or args.reuse, reuse=args.reuse):
        django_setup()
        sizes = {
            key: value
            for key, value in (
                ("sessions", args.sessions),
                ("messages", args.messages),
                ("ledger_rows", args.ledger),
            )
            if value is not None
        }
        built = dataset.dataset_describe() if args.reuse else dataset.dataset_build(**sizes)
        print(
            f"dataset: {built.sessions:,} sessions, {built.turns:,} turns, {built.messages:,} messages, "
            f"{built.ledger_rows:,} ledger rows; long session {built.long_session_id} with "
            f"{built.long_session_messages:,} messages; built in {built.build_seconds:.1f} s"
        )
        try:
            figures = pages_measure(built, runs=args.runs)
        finally:
            from django.db import connections

            connections.close_all()
    figures_print(figures)


def pages_measure(built: dataset.Dataset, *, runs: int) -> list[Figure]:  # type: ignore[name-defined]  # noqa: F821
    from django.test import Client

    client = Client(HTTP_HOST="localhost", REMOTE_ADDR="127.0.0.1")
    long_id = built.long_session_id
    term = built.search_term
    session_pages = -(-built.sessions // 20)
    deep = session_pages * 4 // 5
    ledger_pages = -(-built.ledger_rows // 50)
    pages: list[tuple[str, str]] = [
        ("API /sessions (page 1)", "/sessions"),
        (f"API /sessions (page {deep} of {session_pages})", f"/sessions?page={deep}"),
        ("control room home", "/ui/"),
        ("long session page (control room)", f"/ui/s/{long_id}/"),
        ("long session (API)", f"/sessions/{long_id}"),
        ("session search (sessions page)", f"/ui/sessions/?q={term}"),
        ("session search (nav, as you type)", f"/ui/sessions/nav/?q={term}"),
        ("ledger page 1", "/ui/ledger/"),
        (f"ledger, {ledger_pages // 2} pages down", _ledger_halfway(built.ledger_rows, ledger_pages)),
        ("ledger of one turn", f"/ui/ledger/?turn={built.long_session_turn_id}"),
        ("ledger, errors only", "/ui/ledger/?only_errors=1"),
    ]
    figures = [_measure(client.get, name, path, runs=runs) for name, path in pages]
    # The first view of a long session: no block of it rendered yet (common.markdown's cache;
    # code from before it had none, and every view was a first view).
    from common import markdown

    cached = getattr(markdown, "_markdown_render_cached", None)
    first_view = _measure(
        client.get,
        "long session page, first view",
        f"/ui/s/{long_id}/",
        runs=runs,
        prepare=cached.cache_clear if cached else lambda: None,
    )
    figures.insert(4, first_view)
    return figures


def _ledger_halfway(rows: int, pages: int) -> str:
    """Half-way down the ledger: by keyset cursor (the rows are numbered in time order, so the
    middle id is the middle row), or by page number on code from before keyset pages."""
    from controlroom.forms import LedgerFilterForm

    if "older" in LedgerFilterForm.base_fields:
        return f"/ui/ledger/?older={rows // 2}"
    return f"/ui/ledger/?page={pages // 2}"


class _QueryCounter:
    """Counts the queries of every connection, whichever thread runs the view (async views' do not
    run on the caller's connection)."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, execute: Callable[..., object], sql: str, params: object, many: bool, context: object) -> object:
        self.count += 1
        return execute(sql, params, many, context)

    def install(self, sender: object, connection: object, **kwargs: object) -> None:
        wrappers: list[object] = getattr(connection, "execute_wrappers")  # noqa: B009
        if self not in wrappers:
            wrappers.append(self)


_queries = _QueryCounter()


def _measure(
    get: Callable[..., object], name: str, path: str, *, runs: int, prepare: Callable[[], None] = lambda: None
) -> Figure:
    from django.db.backends.signals import connection_created

    connection_created.connect(_queries.install, weak=False, dispatch_uid="bench-scale-queries")
    for _ in range(3):
        _get(get, path)
    _queries.count = 0
    size = len(_get(get, path))
    queries = _queries.count
    timings, cpu = [], []
    for _ in range(runs):
        prepare()
        started, cpu_started = time.perf_counter(), time.process_time()
        _get(get, path)
        timings.append((time.perf_counter() - started) * 1000)
        cpu.append((time.process_time() - cpu_started) * 1000)
    return Figure(name, path, *_p50_p95(timings), *_p50_p95(cpu), queries, size / 1024)


def _p50_p95(values: list[float]) -> tuple[float, float]:
    ordered = sorted(values)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def _get(get: Callable[..., object], path: str) -> bytes:
    response = get(path)
    status = getattr(response, "status_code", 0)
    if status != 200:
        raise SystemExit(f"{path} answered {status}")
    return bytes(getattr(response, "content", b""))


def figures_print(figures: list[Figure]) -> None:
    # The machine's load says how far the figures are from an idle server's.
    print("\nload average (1, 5, 15 min): " + ", ".join(f"{load:.1f}" for load in os.getloadavg()))
    print("\n| page | p50 ms | p95 ms | target p95 | CPU p50 / p95 ms | queries | size KB |")
    print("|---|---|---|---|---|---|---|")
    for figure in figures:
        verdict = "ok" if figure.p95_ms <= TARGET_MS else "OVER"
        print(
            f"| {figure.name} | {figure.p50_ms:.1f} | {figure.p95_ms:.1f} | ≤ {TARGET_MS:.0f} {verdict} "
            f"| {figure.cpu_p50_ms:.1f} / {figure.cpu_p95_ms:.1f} | {figure.queries} | {figure.size_kb:.0f} |"
        )
    over = [figure.name for figure in figures if figure.p95_ms > TARGET_MS]
    within = f"{len(figures) - len(over)} of {len(figures)} pages within {TARGET_MS:.0f} ms p95"
    print(f"\n{within}" + (f"; over: {', '.join(over)}" if over else ""))


if __name__ == "__main__":
    main()
