"""``python -m oikos_sim``: serve the simulated Oikos until interrupted.

The first line on stdout is ``oikos_sim listening on http://HOST:PORT`` (the real port when
``--port 0``), so a parent process can read where to connect.

An eval case's world is given on the command line: ``--scenario`` (repeatable) lays named
situations over the seed, ``--replay FILE.json`` answers the tools it names from a recorded session
(oikos_sim/replay.py), and ``--pending-approval JSON`` (repeatable) parks an approval before the
first request, e.g. ``'{"target": "service:gitea", "action": "deploy", "reason": "1.22.4"}'``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from oikos_sim.auth import DEFAULT_TOKENS, TokenConfigError, TokenTable, tokens_from_env
from oikos_sim.errors import SimError
from oikos_sim.replay import ReplayInvalid, recording_load
from oikos_sim.scenarios import SCENARIOS
from oikos_sim.server import app_build, base_url, socket_listen, uvicorn_server
from oikos_sim.state import state_create


def _non_negative(text: str) -> float:
    value = float(text)
    if value < 0:
        raise argparse.ArgumentTypeError("must be zero or more")
    return value


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise argparse.ArgumentTypeError(f"not JSON: {error}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError('a JSON object: {"target": ..., "action": ..., "risk_class": ...}')
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m oikos_sim",
        description="A stand-in for Oikos (MCP at /mcp, REST at /api/v1) over a seeded, in-memory homelab.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8090, help="port to bind; 0 picks a free one (default: 8090)")
    parser.add_argument(
        "--execution-seconds",
        type=_non_negative,
        default=1.0,
        help="how long each execution runs (default: 1.0)",
    )
    parser.add_argument(
        "--signal-interval",
        type=_non_negative,
        default=0.0,
        help="fire a demo signal or health change every N seconds (default: 0 = off)",
    )
    parser.add_argument(
        "--scenario",
        action="append",
        default=[],
        choices=sorted(SCENARIOS),
        help="lay a named situation over the seed (repeatable; see oikos_sim/scenarios.py)",
    )
    parser.add_argument(
        "--replay",
        type=Path,
        metavar="FILE.json",
        help="answer the tools named in this recording (a JSON list of {tool, arguments, result}) from it",
    )
    parser.add_argument(
        "--pending-approval",
        action="append",
        default=[],
        type=_json_object,
        metavar="JSON",
        help='an approval already parked at start, e.g. \'{"target": "service:gitea", "action": "deploy"}\' '
        "(repeatable)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        tokens = tokens_from_env(os.environ)
    except TokenConfigError as error:
        print(f"oikos_sim: {error}", file=sys.stderr)
        return 2
    try:
        replay = recording_load(args.replay) if args.replay else []
    except ReplayInvalid as error:
        print(f"oikos_sim: --replay {error}", file=sys.stderr)
        return 2
    try:
        state = state_create(
            tokens=TokenTable(tokens),
            execution_seconds=args.execution_seconds,
            scenarios=args.scenario,
            replay=replay,
            pending_approvals=args.pending_approval,
        )
    except SimError as error:
        print(f"oikos_sim: --pending-approval {error}", file=sys.stderr)
        return 2
    try:
        sock = socket_listen(args.host, args.port)
    except OSError as error:
        print(f"oikos_sim: cannot listen on {args.host}:{args.port}: {error.strerror}", file=sys.stderr)
        return 1
    app = app_build(state, host=args.host, signal_interval=args.signal_interval)
    print(f"oikos_sim listening on {base_url(sock)}", flush=True)
    defaults = " (development defaults)" if tokens == DEFAULT_TOKENS else ""
    print(f"oikos_sim: accepting tokens for {', '.join(tokens)}{defaults}", file=sys.stderr, flush=True)
    uvicorn_server(app).run(sockets=[sock])
    return 0


if __name__ == "__main__":
    sys.exit(main())
