"""What one huge tool result costs: the ledger row it leaves and the memory a turn needs for it.

One turn asks the mini Oikos's `big_json` tool for about `--size` bytes of JSON (structured output:
the MCP SDK sends it as `structured_content` *and* as its serialization in a text block, as
Oikos's tools do), then answers. The MCP server runs in a process of its own (stdio), so the
memory figures are Hermes's alone. Printed:

- the stored ledger row (`agent_activity.result`, as the database keeps it) and the tool-result
  message the model got;
- Hermes's resident memory before the turn and its peak during the turn (Linux `VmHWM`, reset just
  before the turn through `/proc/self/clear_refs`), and the peak's growth over the baseline;
- the baseline of the same run: the growth of one bare `mcp.Client.call_tool` of the same result,
  what the SDK itself needs to receive and parse it, which no change of Hermes's can save.

    .venv/bin/python bench/big_results.py [--size 10000000] [--ledger-max-bytes N]

Measured on the development machine (10 MB result, SQLite):
- before one-copy storage (commit fcf548e): ledger row 19.8 MB, peak +239 MiB (the SDK's call
  alone: +138 MiB);
- after: ledger row 2.1 MB, peak +155 MiB, i.e. +17 MiB over the SDK's own +138 MiB.
The figures printed on your machine are the ones to trust.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _django_setup(workdir: Path, ledger_max_bytes: int | None) -> None:
    os.environ.setdefault("DATABASE_URL", f"sqlite:///{workdir / 'bench.sqlite3'}")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hermes_site.settings")
    os.environ.setdefault("HERMES_LOG_LEVEL", "WARNING")
    if ledger_max_bytes is not None:
        os.environ["HERMES_LEDGER_RESULT_MAX_BYTES"] = str(ledger_max_bytes)
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def _peak_reset() -> None:
    """Reset this process's peak resident size (`VmHWM`) to its current size (Linux ≥ 4.0)."""
    Path("/proc/self/clear_refs").write_text("5")


async def _main(size: int) -> None:
    from channels.db import database_sync_to_async
    from django.conf import settings
    from django.db import connection

    from agent.conversation.events import Done
    from agent.engine.runner import turn_start
    from agent.models import Message
    from agent.tools import ToolHub
    from tests.fakes import FakeAnthropic, Reply

    config = Path(tempfile.mkdtemp(prefix="hermes-bench-mcp-")) / "mcp.json"
    server = {"command": sys.executable, "args": ["-m", "tests.fakes.mcp_stdio_server"], "cwd": str(ROOT)}
    config.write_text(json.dumps({"mcpServers": {"oikos": {**server, "timeout": 120}}}))
    with FakeAnthropic() as fake:
        settings.ANTHROPIC_BASE_URL = fake.url
        settings.ANTHROPIC_API_KEY = fake.api_key
        settings.HERMES_MCP_CONFIG = str(config)
        hub = ToolHub.from_settings()
        await hub.list_tools()  # start the server process before measuring
        fake.enqueue(Reply.tool_use("mcp__oikos__big_json", {"size_bytes": size}), Reply.text("That is a lot."))
        baseline = _status_kib("VmRSS")
        _peak_reset()
        handle = await turn_start(text="dump it", actor="operator:bench", origin="bench", hub=hub)
        async for event in handle.events():
            if isinstance(event, Done) and event.status != "done":
                raise RuntimeError(f"turn failed: {event}")
        peak = _status_kib("VmHWM")
        await hub.aclose()

    @database_sync_to_async
    def stored() -> tuple[int, int]:
        with connection.cursor() as cursor:
            cursor.execute("SELECT length(result) FROM agent_activity")
            (result_chars,) = cursor.fetchone()
        message = Message.objects.filter(turn_id=handle.turn_id, role="user").order_by("-id").first()
        return result_chars, len(json.dumps(message.content)) if message else 0

    result_chars, message_bytes = await stored()
    print(f"tool result asked for:        {size / 1e6:8.1f} MB of JSON (structured output)")
    print(f"ledger row (result column):   {result_chars / 1e6:8.2f} MB")
    print(f"tool_result message (model):  {message_bytes / 1e3:8.1f} kB")
    print(f"resident before the turn:     {baseline / 1024:8.0f} MiB")
    print(f"peak during the turn:         {peak / 1024:8.0f} MiB  (+{(peak - baseline) / 1024:.0f} MiB)")


async def _sdk_call_growth(size: int) -> int:
    """KiB the peak grows by for one bare `Client.call_tool` of the result (the SDK's floor)."""
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(command=sys.executable, args=["-m", "tests.fakes.mcp_stdio_server"], cwd=str(ROOT))
    async with Client(params) as client:
        await client.list_tools()
        before = _status_kib("VmRSS")
        _peak_reset()
        result = await client.call_tool("big_json", {"size_bytes": size})
        growth = _status_kib("VmHWM") - before
        del result
    return growth


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=10_000_000, help="bytes of JSON the tool returns")
    parser.add_argument("--ledger-max-bytes", type=int, default=None, help="HERMES_LEDGER_RESULT_MAX_BYTES")
    parser.add_argument("--sdk-floor", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.sdk_floor:
        print(asyncio.run(_sdk_call_growth(args.size)))
        return
    _django_setup(Path(tempfile.mkdtemp(prefix="hermes-bench-")), args.ledger_max_bytes)
    asyncio.run(_main(args.size))
    floor = subprocess.run(
        [sys.executable, __file__, "--sdk-floor", "--size", str(args.size)], capture_output=True, text=True, check=True
    ).stdout.strip()
    print(f"  the SDK's bare call alone (own process):  +{int(floor) / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
