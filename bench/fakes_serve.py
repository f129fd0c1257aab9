"""One fake of `bench/versus_minimal.py` in a process of its own, so the load it takes does not
share an interpreter (and its GIL) with the clients being measured.

    python bench/fakes_serve.py model     # the scripted model: prints {"url", "api_key"}
    python bench/fakes_serve.py oikos     # oikos_sim: prints {"mcp_url", "token"}

It prints one JSON line once it serves, and stops when its standard input closes (its parent
ended, whichever way).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from oikos_sim.auth import DEFAULT_TOKENS  # noqa: E402
from oikos_sim.server import serve_in_thread  # noqa: E402
from tests.fakes import FakeAnthropic  # noqa: E402
from tests.fakes.scripted_models import DegradedInvestigator  # noqa: E402

# The scripted model waits this long between two stream events (one text chunk, ~ a token or two).
TOKEN_SECONDS = 0.005


def main() -> None:
    kind = sys.argv[1] if len(sys.argv) > 1 else ""
    if kind == "model":
        with FakeAnthropic() as model:
            model.responder = DegradedInvestigator(delay=TOKEN_SECONDS)
            print(json.dumps({"url": model.url, "api_key": model.api_key}), flush=True)
            sys.stdin.read()
    elif kind == "oikos":
        # Idle connections stay open past the longest wait of a batch: with uvicorn's 5 s, a pooled
        # connection reused just as the server closes it fails the call (ReadError), which the raw
        # MCP client of the minimal loop does not survive.
        with serve_in_thread(execution_seconds=0.2, keep_alive_seconds=120) as oikos:
            print(json.dumps({"mcp_url": oikos.mcp_url, "token": DEFAULT_TOKENS["agent:hermes"]}), flush=True)
            sys.stdin.read()
    else:
        sys.exit("usage: fakes_serve.py model|oikos")


if __name__ == "__main__":
    main()
