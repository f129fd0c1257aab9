"""What syncing costs Hermes's SQLite writes, in WAL mode: `synchronous=NORMAL` (no sync at commit),
`FULL` (every commit synced) and what Hermes does, NORMAL with each turn's end committed FULL.

With WAL, NORMAL syncs only at checkpoints: a commit answered to the operator can be lost to a power
cut or an I/O remount. A FULL commit syncs the whole WAL, so the turn's end committed FULL makes
the turn durable with everything before it (agent/store/, `turn_finish`). This times the
commits a turn makes — its question, one progress write per tool round, its end — as Hermes makes
them (IMMEDIATE transactions, ~2 KB messages), in a file next to the repository (the disk the
database would use, not a tmpfs):

    .venv/bin/python bench/sqlite_sync.py [--turns 200] [--rounds 2] [--dir .]
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

MIXED = "NORMAL, end FULL"
MESSAGE = json.dumps([{"type": "text", "text": "node degraded; " * 130}])


def turn_writes(connection: sqlite3.Connection, turn: int, rounds: int, *, end_full: bool) -> None:
    """One turn's commits: the question, a progress write per tool round, the end."""
    for write in range(rounds + 2):
        last = write == rounds + 1
        if end_full and last:
            connection.execute("PRAGMA synchronous=FULL")
        connection.execute("BEGIN IMMEDIATE")
        connection.execute("INSERT INTO messages (turn, content) VALUES (?, ?)", (turn, MESSAGE))
        connection.execute("UPDATE turns SET beat = beat + 1 WHERE id = ?", (turn,))
        connection.execute("COMMIT")
        if end_full and last:
            connection.execute("PRAGMA synchronous=NORMAL")


def measure(directory: Path, mode: str, turns: int, rounds: int) -> list[float]:
    synchronous = "FULL" if mode == "FULL" else "NORMAL"
    with tempfile.TemporaryDirectory(dir=directory) as scratch:
        connection = sqlite3.connect(Path(scratch) / "bench.sqlite3", isolation_level=None)
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute(f"PRAGMA synchronous={synchronous}")
        connection.execute("CREATE TABLE messages (id INTEGER PRIMARY KEY, turn INTEGER, content TEXT)")
        connection.execute("CREATE TABLE turns (id INTEGER PRIMARY KEY, beat INTEGER DEFAULT 0)")
        connection.executemany("INSERT INTO turns (id) VALUES (?)", [(n,) for n in range(turns)])
        timings = []
        for turn in range(turns):
            started = time.perf_counter()
            turn_writes(connection, turn, rounds, end_full=mode == MIXED)
            timings.append((time.perf_counter() - started) * 1000)
        connection.close()
        return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=2, help="tool rounds per turn")
    parser.add_argument("--dir", type=Path, default=Path(__file__).resolve().parents[1])
    args = parser.parse_args()
    results: dict[str, list[float]] = {}
    # Alternating, twice each, so a change in the machine's load hits all alike.
    for mode in ("NORMAL", "FULL", MIXED) * 2:
        results.setdefault(mode, []).extend(measure(args.dir, mode, args.turns, args.rounds))
    for mode, timings in results.items():
        timings.sort()
        print(
            f"{mode}: a turn's {args.rounds + 2} commits take "
            f"median {statistics.median(timings):.2f} ms, p95 {timings[int(len(timings) * 0.95)]:.2f} ms"
        )


if __name__ == "__main__":
    main()
