"""Prompt caching across compactions: one long session against a model with a small window.

Each turn's usage says how much of its input was read from the prompt cache and how much was
not (uncached input: tokens sent fresh plus tokens written to the cache). A compaction changes
the start of the conversation, so the turn that compacts rebuilds the cached prefix once (its
summarising call is uncached too); the turns after it read the new prefix again. The figures come
from the scripted Messages API's prompt cache (`tests/fakes/anthropic_cache.py`: prefixes written
at breakpoints, read when a later request starts with them, like the API's), so they show what
Hermes's breakpoints and compaction do, not Anthropic's prices.

    .venv/bin/python bench/compaction.py [--questions 30] [--window-factor 3]

The window is `--window-factor` times the first request's size (tools, system prompt, question).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness import django_setup  # noqa: E402


def _share(read: int, total: int) -> str:
    return f"{100 * read / total:5.1f}%" if total else "    -"


async def _main(count: int, factor: float) -> None:
    from channels.db import database_sync_to_async
    from django.conf import settings

    from agent.conversation.events import Done
    from agent.engine.runner import turn_start
    from agent.models import AgentSession
    from agent.tools import ToolHub
    from tests.fakes import FakeAnthropic
    from tests.fakes.anthropic_cache import prompt_tokens
    from tests.fakes.mcp_servers import MCPTestServer
    from tests.fakes.scripted_models import RememberingModel
    from tests.faults.test_context_window import questions

    with FakeAnthropic() as fake:
        server = MCPTestServer()
        server.start()
        try:
            settings.ANTHROPIC_BASE_URL = fake.url
            settings.ANTHROPIC_API_KEY = fake.api_key
            settings.HERMES_MCP_CONFIG = None
            settings.OIKOS_MCP_URL = server.url
            settings.OIKOS_MCP_TOKEN = server.token
            model = RememberingModel()
            fake.responder = model
            hub = ToolHub.from_settings()
            session_id = None
            compactions = 0
            print(f"{'turn':>4} {'prompt':>7} {'cache read':>10} {'uncached in':>11} {'calls':>5}  note")
            # Per phase: cache read tokens, prompt tokens, turns.
            totals = {"before the first compaction": [0, 0, 0], "that compacted": [0, 0, 0], "after one": [0, 0, 0]}
            after_compaction = False
            for index, question in enumerate(questions(count)):
                handle = await turn_start(
                    text=question, actor="operator:bench", origin="bench", session_id=session_id, hub=hub
                )
                done = [event async for event in handle.events()][-1]
                assert isinstance(done, Done) and done.status == "done", done
                session_id = handle.session_id
                if index == 0:
                    window = int(factor * prompt_tokens(fake.requests[0].body))
                    fake.context_window = settings.HERMES_CONTEXT_WINDOW = window
                    print(f"     window {window:,} tokens ({factor:g}x the first request)")
                usage = done.usage
                read = usage["cache_read_input_tokens"]
                uncached = usage["input_tokens"] + usage["cache_creation_input_tokens"]
                prompt = read + uncached
                session = await database_sync_to_async(AgentSession.objects.get)(pk=session_id)
                compacted = session.compactions > compactions
                compactions = session.compactions
                calls = usage.get("compaction_calls", 0)
                note = ""
                if compacted:
                    note = f"compacted ({calls} summarising call{'s' if calls != 1 else ''})"
                    phase = "that compacted"
                    after_compaction = True
                elif after_compaction:
                    phase = "after one"
                else:
                    phase = "before the first compaction"
                totals[phase][0] += read
                totals[phase][1] += prompt
                totals[phase][2] += 1
                print(f"{index + 1:>4} {prompt:>7,} {_share(read, prompt):>10} {uncached:>11,} {calls:>5}  {note}")
            await hub.aclose()
        finally:
            server.stop()
    print()
    for phase, (read, prompt, turns) in totals.items():
        uncached = (prompt - read) // turns if turns else 0
        print(f"turns {phase:<28} cache read share {_share(read, prompt).strip():>6}, uncached input {uncached:,}/turn")
    print(f"{compactions} compactions, {model.summaries} summarising calls, {len(fake.rejections)} refused requests")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=30)
    parser.add_argument("--window-factor", type=float, default=3.0)
    args = parser.parse_args()
    django_setup()
    asyncio.run(_main(args.questions, args.window_factor))


if __name__ == "__main__":
    main()
