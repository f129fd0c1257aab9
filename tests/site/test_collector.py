"""Python's garbage collector around start-up (`hermes_site/collector.py`): off while a process
starts, on again once it serves or runs its command, with what start-up built frozen out of its
sight and its young generation collected less often. A process left with the collector off would
grow without bound; these fail then.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import httpx2

from hermes_site.collector import YOUNG_GENERATION_THRESHOLD
from tests.fakes.daphne import DaphneServer, clean_environ
from tests.fakes.subprocesses import manage


def test_a_command_runs_with_the_collector_on_and_the_start_up_heap_frozen(tmp_path: Path) -> None:
    env = {**clean_environ(), "HERMES_DATA_DIR": str(tmp_path), "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}"}
    shown = "import gc; print(gc.isenabled(), gc.get_freeze_count(), gc.get_threshold()[0])"
    run = manage("shell", "-c", shown, env=env)
    assert run.returncode == 0, run.stderr
    enabled, frozen, young = run.stdout.split()[-3:]
    assert enabled == "True"
    # Django's modules, settings and app registry: tens of thousands of objects at the least.
    assert int(frozen) > 50_000
    assert int(young) == YOUNG_GENERATION_THRESHOLD


def _collections(server: DaphneServer) -> int:
    """Young-generation collections the server has run so far, from its `/metrics`."""
    metrics = httpx2.get(f"{server.url}/metrics", timeout=10).text
    found = re.search(r'^python_gc_collections_total\{generation="0"\} ([0-9.e+]+)$', metrics, re.MULTILINE)
    assert found, "no garbage-collector figures in /metrics"
    return int(float(found.group(1)))


def test_the_server_collects_garbage_once_it_serves(daphne_server: Callable[..., DaphneServer]) -> None:
    server = daphne_server()
    before = _collections(server)
    with httpx2.Client(timeout=10) as client:
        # A young collection comes every YOUNG_GENERATION_THRESHOLD allocations: within a few dozen
        # requests, and certainly within a thousand.
        for _ in range(1000):
            assert client.get(f"{server.url}/healthz").status_code == 200
            if _collections(server) > before:
                break
    assert _collections(server) > before
