"""`python -m agent.conformance_client <url>`: Hermes's MCP client, as the MCP conformance
suite's client mode drives it (`@modelcontextprotocol/conformance client --command ...`).

The suite starts a test server for a scenario, runs this command with the server's URL appended,
and judges what the server saw. This connects with Hermes's own tool hub (the code every turn
uses: connection, redaction, schema parsing, the elicitation path), lists the tools, and calls
each one with no arguments. A server's questions (elicitation) are answered by a fixed policy,
since no person is there: accept, with every field the schema gives a default for filled with it
(SEP-1034) — what the suite's elicitation scenarios ask for ("please accept with defaults").
A question whose form has a required field without a default is declined.

Exit status: 0 when every call returned a result, 1 otherwise (the suite reads its own checks).
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agent.tools.elicitation import ElicitationAnswer, ElicitationAsk

# Django is set up first (`main`): importing the tool hub reads settings.


async def answer_with_defaults(ask: ElicitationAsk) -> ElicitationAnswer:
    """Accept with the schema's defaults; decline what cannot be answered without a person."""
    from agent.tools.elicitation import ElicitationAnswer, ElicitContentError, elicit_content_validate

    if ask.schema_error:
        return ElicitationAnswer(action="decline", reason=ask.schema_error)
    try:
        content = elicit_content_validate(ask.fields, {})
    except ElicitContentError as missing:
        return ElicitationAnswer(action="decline", reason=str(missing))
    return ElicitationAnswer(action="accept", content=content, answered_by="conformance-client")


async def run(url: str) -> int:
    from agent.tools.config import ServerConfig
    from agent.tools.context import ToolCallContext
    from agent.tools.hub import ToolHub

    hub = ToolHub([ServerConfig(name="conformance", transport="http", url=url, timeout=20.0)])
    try:
        specs = await hub.list_tools()
        unreachable = hub.unreachable()
        if unreachable:
            print(f"cannot list tools: {unreachable[0].error}", file=sys.stderr)
            return 1
        failed = False
        context = ToolCallContext(elicitor=answer_with_defaults)
        for spec in specs:
            outcome = await hub.call(spec.name, {}, context=context)
            text = " ".join(block.get("text", "") for block in outcome.content if block.get("type") == "text")
            print(f"{spec.tool}: {'error: ' if outcome.is_error else ''}{text}")
            failed = failed or (outcome.is_error and outcome.record.get("error") is not None)
        return 1 if failed else 0
    finally:
        await hub.aclose()


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m agent.conformance_client <server-url>", file=sys.stderr)
        return 2
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hermes_site.settings")
    import django

    django.setup()
    return asyncio.run(run(argv[0]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
