"""`make run`: Hermes and, unless an Oikos is configured, the `oikos_sim` stand-in beside it.

Starts oikos_sim (when neither `OIKOS_MCP_URL` nor `HERMES_MCP_CONFIG` is set), applies
migrations, and serves Hermes with Daphne on loopback, with the watcher (`manage.py watch`)
beside it. Ctrl-C stops them all.

    python -m hermes_site.dev [--port 8000] [--oikos-port 8090] [--demo [--demo-interval 45]]

Nothing spends tokens unasked: oikos_sim's simulated incidents (`--signal-interval`, each one an
investigation with the real model) are off unless `--demo` (`make demo`) turns them on, and the
dev setup has a daily token budget unless the operator set one (docs/budget.md). The start banner
says what will spend tokens.

What the launcher decides (the simulator's URLs and tokens, the budget) it also writes to the
checkout's `.env` (common/dotenv.py), so `manage.py ask` in another terminal reaches the same
Oikos under the same budget; the file is removed when the launcher stops. A `.env` the launcher
did not write is never touched: the banner prints the lines to export instead.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from pathlib import Path
from types import FrameType

from common.dotenv import OWNER_KEY, DotenvError, dotenv_load, dotenv_parse, dotenv_path, process_alive

ROOT = Path(__file__).resolve().parent.parent
SIM_AGENT_TOKEN = "hermes-agent-dev-token"
SIM_OPERATOR_TOKEN = "hermes-operator-dev-token"
READY_PREFIX = "oikos_sim listening on "
# `--demo`: seconds between the simulated incidents oikos_sim raises (each one an investigation).
DEMO_SIGNAL_INTERVAL = 45
# The daily token budget of the dev setup when the operator set none: room for an evening of
# questions and a demo's investigations, and a ceiling on what a forgotten `make demo` can spend.
DEV_DAILY_TOKEN_BUDGET = 1_000_000


def _oikos_sim_start(port: int, env: dict[str, str], *, pulse: float) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "oikos_sim",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--signal-interval",
            f"{pulse:g}",
        ],
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


def _dotenv_ours(path: Path) -> bool | None:
    """Whether the launcher may write `path`: True (absent, or written by a launcher that is gone
    or by this one), False (someone else's file, or a launcher still running), None (not a file)."""
    if not path.exists():
        return True
    if not path.is_file():
        return None
    try:
        owner = dotenv_parse(path.read_text(encoding="utf-8"), source=str(path)).get(OWNER_KEY, "")
    except (DotenvError, OSError):
        return False
    if not owner.isdigit():
        return False
    return int(owner) == os.getpid() or not process_alive(int(owner))


def dotenv_write(path: Path, values: dict[str, str]) -> bool:
    """Write what the launcher decided to `path` for commands started elsewhere; False when the file
    is not the launcher's to write."""
    if not values or not _dotenv_ours(path):
        return False
    lines = [
        "# Written by `make run` (hermes_site/dev.py) while it runs, and removed when it stops: `manage.py`",
        "# commands started in another terminal (`ask`, `doctor`) take these when their environment lacks them.",
        f"{OWNER_KEY}={os.getpid()}",
        *(f"{name}={value}" for name, value in values.items()),
    ]
    partial = path.with_name(path.name + ".partial")
    try:
        # Tokens inside: readable by the operator only.
        partial.touch(mode=0o600)
        partial.write_text("\n".join(lines) + "\n", encoding="utf-8")
        partial.replace(path)
    except OSError:
        return False  # the banner prints the lines to export instead
    return True


def dotenv_remove(path: Path) -> None:
    """Remove the file this launcher wrote (only if it is still this launcher's)."""
    try:
        owner = dotenv_parse(path.read_text(encoding="utf-8"), source=str(path)).get(OWNER_KEY)
    except (DotenvError, OSError):
        return
    if owner == str(os.getpid()):
        path.unlink(missing_ok=True)


def banner(
    env: dict[str, str],
    *,
    port: int,
    sim: bool,
    demo: float,
    budget_ours: bool,
    dotenv: Path,
    written: dict[str, str],
) -> str:
    """What the operator reads at start: where Hermes is, what will spend tokens, how to `ask`."""
    lines = [f"\nHermes control room: http://127.0.0.1:{port}/ui/", ""]
    if not (env.get("ANTHROPIC_API_KEY") or env.get("ANTHROPIC_BASE_URL")):
        lines += [
            "No model configured: set ANTHROPIC_API_KEY (or ANTHROPIC_BASE_URL for a compatible local "
            "server) to chat. Tools, approvals, health and history work without it, and nothing spends tokens.",
        ]
    else:
        lines.append("What spends tokens (the model's):")
        lines.append("  - your questions: the control room's chat and `manage.py ask`")
        if sim and demo:
            lines.append(
                f"  - investigations: demo mode, oikos_sim raises a simulated incident every {demo:g} s "
                "and the watcher investigates each one"
            )
        elif sim:
            lines.append(
                "  - investigations: none unasked, oikos_sim's incident pulse is off (`make demo` turns it on)"
            )
        else:
            lines.append("  - investigations: each signal your Oikos raises (docs/investigations.md)")
        budget = env.get("HERMES_DAILY_TOKEN_BUDGET", "")
        if budget.strip() in ("", "0"):
            lines.append("  - daily cap: none (HERMES_DAILY_TOKEN_BUDGET=0 is unlimited)")
        else:
            whose = "the dev default; set HERMES_DAILY_TOKEN_BUDGET to change it" if budget_ours else "yours"
            lines.append(f"  - daily cap: {int(budget):,} tokens ({whose}); docs/budget.md")
    if written:
        if dotenv.is_file() and dotenv_parse(dotenv.read_text(encoding="utf-8")).get(OWNER_KEY) == str(os.getpid()):
            lines += ["", f"`manage.py ask` in another terminal reads {dotenv} (removed when this stops)."]
        else:
            exports = " ".join(f"{name}={value}" for name, value in written.items())
            lines += [
                "",
                f"make run did not write {dotenv} (someone else's, or not writable);",
                "to ask from another terminal, first run:",
                f"  export {exports}",
            ]
    lines += ["", "Ctrl-C stops them all."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=int(os.environ.get("HERMES_PORT", "8000")))
    parser.add_argument("--oikos-port", type=int, default=8090)
    parser.add_argument(
        "--demo",
        action="store_true",
        help=f"oikos_sim raises a simulated incident every {DEMO_SIGNAL_INTERVAL} s, and the watcher investigates "
        "each one with the model (spends tokens)",
    )
    parser.add_argument(
        "--demo-interval",
        type=float,
        default=DEMO_SIGNAL_INTERVAL,
        help=f"with --demo: seconds between the simulated incidents (default {DEMO_SIGNAL_INTERVAL})",
    )
    args = parser.parse_args(argv)

    env = dict(os.environ)
    path = dotenv_path(env)
    try:
        # The operator's own `.env` (or a running launcher's) counts as configuration here too.
        dotenv_load(env)
    except DotenvError as exc:
        raise SystemExit(f"error: {exc}") from None
    children: list[subprocess.Popen[str] | subprocess.Popen[bytes]] = []
    # What the launcher chooses for the operator: its children get it, and so does `.env`.
    decided: dict[str, str] = {}
    sim = not env.get("OIKOS_MCP_URL") and not env.get("HERMES_MCP_CONFIG")
    if sim:
        process, sim_url = _oikos_sim_start(args.oikos_port, env, pulse=args.demo_interval if args.demo else 0)
        children.append(process)
        decided.update(
            OIKOS_MCP_URL=f"{sim_url}/mcp",
            OIKOS_MCP_TOKEN=SIM_AGENT_TOKEN,
            OIKOS_API_URL=f"{sim_url}/api/v1",
            OIKOS_API_TOKEN=SIM_OPERATOR_TOKEN,
        )
        pulse = f"incident pulse every {args.demo_interval:g} s" if args.demo else "incident pulse off"
        print(f"oikos_sim (the Oikos stand-in) is running at {sim_url} ({pulse})", flush=True)
    elif args.demo:
        print("--demo changes nothing with a configured Oikos: the incident pulse is oikos_sim's.", flush=True)
    budget_ours = not env.get("HERMES_DAILY_TOKEN_BUDGET", "").strip()
    if budget_ours:
        decided["HERMES_DAILY_TOKEN_BUDGET"] = str(DEV_DAILY_TOKEN_BUDGET)
    env.update(decided)

    def stop(_signum: int, _frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    try:
        dotenv_write(path, decided)
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
        print(
            banner(
                env,
                port=args.port,
                sim=sim,
                demo=args.demo_interval if args.demo else 0,
                budget_ours=budget_ours,
                dotenv=path,
                written=decided,
            ),
            flush=True,
        )
        return daphne.wait()
    except KeyboardInterrupt:
        return 0
    except subprocess.CalledProcessError as exc:
        return exc.returncode
    finally:
        dotenv_remove(path)
        for child in reversed(children):
            if child.poll() is None:
                child.terminate()
                try:
                    child.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    child.kill()


if __name__ == "__main__":
    sys.exit(main())
