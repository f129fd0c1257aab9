"""`make run`: Hermes and, unless an Oikos is configured, the `oikos_sim` stand-in beside it.

Starts oikos_sim (when neither `OIKOS_MCP_URL` nor `HERMES_MCP_CONFIG` is set), applies
migrations, and serves Hermes with Daphne on loopback, with the watcher (`manage.py watch`)
beside it. Ctrl-C stops them all.

    python -m hermes_site.dev [--port 8000] [--oikos-port 8090]
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from pathlib import Path
from types import FrameType

ROOT = Path(__file__).resolve().parent.parent
SIM_AGENT_TOKEN = "hermes-agent-dev-token"
SIM_OPERATOR_TOKEN = "hermes-operator-dev-token"
READY_PREFIX = "oikos_sim listening on "


def _oikos_sim_start(port: int, env: dict[str, str]) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "oikos_sim", "--host", "127.0.0.1", "--port", str(port), "--signal-interval", "45"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    line = process.stdout.readline().strip()
    if not line.startswith(READY_PREFIX):
        process.terminate()
        raise SystemExit(f"oikos_sim did not start (is port {port} free? try --oikos-port): {line!r}")
    return process, line.removeprefix(READY_PREFIX)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=int(os.environ.get("HERMES_PORT", "8000")))
    parser.add_argument("--oikos-port", type=int, default=8090)
    args = parser.parse_args(argv)

    env = dict(os.environ)
    children: list[subprocess.Popen[str] | subprocess.Popen[bytes]] = []
    if not env.get("OIKOS_MCP_URL") and not env.get("HERMES_MCP_CONFIG"):
        sim, sim_url = _oikos_sim_start(args.oikos_port, env)
        children.append(sim)
        env.update(
            OIKOS_MCP_URL=f"{sim_url}/mcp",
            OIKOS_MCP_TOKEN=SIM_AGENT_TOKEN,
            OIKOS_API_URL=f"{sim_url}/api/v1",
            OIKOS_API_TOKEN=SIM_OPERATOR_TOKEN,
        )
        print(f"oikos_sim (the Oikos stand-in) is running at {sim_url}", flush=True)

    def stop(_signum: int, _frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    try:
        subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v0"], cwd=ROOT, env=env, check=True)
        daphne = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "hermes_site.serve",
                "-b",
                "127.0.0.1",
                "-p",
                str(args.port),
                "hermes_site.asgi:application",
            ],
            cwd=ROOT,
            env=env,
        )
        children.append(daphne)
        if env.get("OIKOS_API_URL") or env.get("OIKOS_MCP_URL"):
            # The watcher opens investigations when Oikos raises a signal (docs/investigations.md).
            children.append(subprocess.Popen([sys.executable, "manage.py", "watch"], cwd=ROOT, env=env))
        print(f"\nHermes control room: http://127.0.0.1:{args.port}/ui/", flush=True)
        if not (env.get("ANTHROPIC_API_KEY") or env.get("ANTHROPIC_BASE_URL")):
            print(
                "No model configured: set ANTHROPIC_API_KEY (or ANTHROPIC_BASE_URL for a compatible local "
                "server) to chat. Tools, approvals, health and history work without it.",
                flush=True,
            )
        return daphne.wait()
    except KeyboardInterrupt:
        return 0
    except subprocess.CalledProcessError as exc:
        return exc.returncode
    finally:
        for child in reversed(children):
            if child.poll() is None:
                child.terminate()
                try:
                    child.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    child.kill()


if __name__ == "__main__":
    sys.exit(main())
