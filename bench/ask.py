"""How fast `manage.py ask` answers a one-shot question, against a bare script doing the same.

Both run the same turn (health summary → blast radius → a streamed answer) against the same fakes:
the scripted model (`tests/fakes/anthropic_api.py`) and the mini Oikos MCP server over loopback
HTTP, both started here. The bare script (`bench/ask_bare.py`) is the least an agent can do: the
anthropic and mcp SDKs and a tool loop, nothing stored. `ask` also starts Django, stores the turn
and announces its presence. Runs alternate, so drift on a noisy machine hits both alike; the figure
that matters is the ratio of the medians (target: ≤ 1.3x). Hermes starts with the garbage collector
off (hermes_site/collector.py); the bare script is also run started that way (`--quiet-start`), and
the ratio to it says what Hermes costs beyond the collector.

    .venv/bin/python bench/ask.py [--rounds 5]
    createdb -h 127.0.0.1 -U postgres hermes_bench   # once
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/hermes_bench .venv/bin/python bench/ask.py

Without DATABASE_URL it uses a fresh SQLite file (the embedded default).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

QUESTION = "What's degraded, and what depends on it?"


def _cpu_of_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall, CPU) seconds of one run; CPU is what the process itself used, which a busy machine
    inflates far less than the wall."""
    cpu, started = _cpu_of_children(), time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if done.returncode != 0 or "degraded" not in done.stdout.lower():
        raise RuntimeError(f"{command[1]} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return wall, _cpu_of_children() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    from tests.fakes import FakeAnthropic
    from tests.fakes.mcp_servers import MCPTestServer
    from tests.fakes.scripted_models import DegradedInvestigator

    data_dir = Path(tempfile.mkdtemp(prefix="hermes-bench-ask-"))
    env = dict(os.environ)
    env.setdefault("DATABASE_URL", f"sqlite:///{data_dir / 'bench.sqlite3'}")
    env.update(HERMES_DATA_DIR=str(data_dir), HERMES_LOG_LEVEL="WARNING")
    env.pop("HERMES_MCP_CONFIG", None)
    # Timed as an installed Hermes starts: from cached bytecode (kept out of the source tree). Without
    # it, compiling the sources dominates both sides.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(data_dir / "pycache")
    engine = "PostgreSQL" if env["DATABASE_URL"].startswith("postgres") else "SQLite"
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v0"], cwd=ROOT, env=env, check=True)

    python = sys.executable
    ask = [python, "manage.py", "ask", QUESTION]
    bare = [python, str(ROOT / "bench" / "ask_bare.py"), QUESTION]
    quiet = [*bare, "--quiet-start"]
    with FakeAnthropic() as fake:
        server = MCPTestServer()
        server.start()
        try:
            fake.responder = DegradedInvestigator()
            env.update(
                ANTHROPIC_BASE_URL=fake.url,
                ANTHROPIC_API_KEY=fake.api_key,
                OIKOS_MCP_URL=server.url,
                OIKOS_MCP_TOKEN=server.token,
                DJANGO_SETTINGS_MODULE="hermes_site.settings",
            )
            # Warm the page cache and write the bytecode for both before timing anything.
            _run(ask, env)
            _run(bare, env)
            asks, bares, quiets = [], [], []
            for _ in range(args.rounds):
                asks.append(_run(ask, env))
                bares.append(_run(bare, env))
                quiets.append(_run(quiet, env))
        finally:
            server.stop()
    print(f"database: {engine}; medians of {args.rounds} runs each, alternating")
    print(f"{'':22} {'wall ms':>8} {'CPU ms':>8}")
    for name, runs in (("manage.py ask", asks), ("bare script", bares), ("bare, --quiet-start", quiets)):
        print(f"{name:22} {_median(runs, 0):>8.0f} {_median(runs, 1):>8.0f}")
    print(
        f"ask ÷ bare script: wall {_median(asks, 0) / _median(bares, 0):.2f}x (target ≤ 1.30x), "
        f"CPU {_median(asks, 1) / _median(bares, 1):.2f}x"
    )
    # Hermes starts with the collector off (hermes_site/collector.py); the same start given to the
    # bare script shows how much of the ratio is that, and how much is Hermes's own cost.
    print(
        f"ask ÷ bare script started as Hermes starts: wall {_median(asks, 0) / _median(quiets, 0):.2f}x, "
        f"CPU {_median(asks, 1) / _median(quiets, 1):.2f}x"
    )


def _median(runs: list[tuple[float, float]], index: int) -> float:
    return statistics.median(run[index] for run in runs) * 1000


if __name__ == "__main__":
    main()
