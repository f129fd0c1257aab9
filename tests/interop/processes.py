"""What interop tests ask of Hermes processes: pairing tokens, and rows of their SQLite file.

Hermes itself is served by `tests.fakes.daphne.DaphneServer`; every process is given an explicit
environment (`tests.fakes.subprocesses.clean_environ()` plus what the test sets).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping

from tests.fakes.subprocesses import manage


def database_rows(url: str, query: str, *params: object) -> list[tuple]:
    """Rows of a query against a Hermes process's SQLite file, read from the test process."""
    with sqlite3.connect(url.removeprefix("sqlite:///")) as connection:
        return list(connection.execute(query, params))


def pairing_tokens(*peers: str, env: Mapping[str, str]) -> dict[str, str]:
    """Tokens for several peers, issued in one process (what `a2a_pair` does, without one process each)."""
    code = (
        "import json; from interop.services import pairing_token_issue; "
        f"print(json.dumps({{peer: pairing_token_issue(peer=peer) for peer in {list(peers)!r}}}))"
    )
    run = manage("shell", "-c", code, env=env)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout.strip().splitlines()[-1])
