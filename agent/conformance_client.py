"""`python -m agent.conformance_client <url>`: Hermes's MCP client, as the MCP conformance
suite's client mode drives it (`@modelcontextprotocol/conformance client --command ...`).

The suite starts a test server for a scenario, runs this command with the server's URL appended,
and judges what the server saw. This connects with Hermes's own tool hub (the code every turn
uses: connection, redaction, schema parsing, the elicitation path), lists the tools, and calls
each one with no arguments. A server's questions (elicitation) are answered by a fixed policy,
since no person is there: accept, with every field the schema gives a default for filled with it
(SEP-1034) — what the suite's elicitation scenarios ask for ("please accept with defaults").
A question whose form has a required field without a default is declined.

The `auth/*` scenarios are answered with Hermes's MCP OAuth client (`agent.tools.oauth`, the code
every HTTP connection uses), configured as an operator would in the `mcpServers` file from what the
suite hands over in `MCP_CONFORMANCE_CONTEXT` (a pre-registered client, a service account's secret
or key). Where a person would open the authorization URL, `HeadlessBrowser` fetches it and reads
the code from the redirect, as the suite's own clients do; tokens go to the database like any
server's (`DATABASE_URL` names it).

Exit status: 0 when every call returned a result, 1 otherwise (the suite reads its own checks).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

import httpx2
from mcp.shared.auth import AuthorizationCodeResult

if TYPE_CHECKING:
    from agent.elicitation.types import ElicitationAnswer, ElicitationAsk
    from agent.tools.config import ServerConfig

# Where the headless browser says the authorization server should send it back; never opened.
REDIRECT_URI = "http://localhost:3000/callback"
# The client ID metadata document the `auth/basic-cimd` scenario expects (an operator would host one).
CLIENT_METADATA_URL = "https://conformance-test.local/client-metadata.json"

# Django is set up first (`main`): importing the tool hub reads settings.


async def answer_with_defaults(ask: ElicitationAsk) -> ElicitationAnswer:
    """Accept with the schema's defaults; decline what cannot be answered without a person."""
    from agent.elicitation.types import ElicitationAnswer, ElicitContentError, elicit_content_validate

    if ask.schema_error:
        return ElicitationAnswer(action="decline", reason=ask.schema_error)
    try:
        content = elicit_content_validate(ask.fields, {})
    except ElicitContentError as missing:
        return ElicitationAnswer(action="decline", reason=str(missing))
    return ElicitationAnswer(action="accept", content=content, answered_by="conformance-client")


class HeadlessBrowser:
    """Stands in for the operator's browser: fetches the authorization URL without following the
    redirect, and brings back the code, state and issuer the authorization server put in it."""

    def __init__(self) -> None:
        self._answers: list[AuthorizationCodeResult] = []

    async def redirect(self, authorization_url: str) -> None:
        async with httpx2.AsyncClient(timeout=20.0) as client:
            response = await client.get(authorization_url)
        location = response.headers.get("location")
        if not response.is_redirect or not location:
            raise RuntimeError(f"the authorization server answered HTTP {response.status_code}, not a redirect")
        query = parse_qs(urlsplit(location).query)
        if "code" not in query:
            raise RuntimeError(f"the authorization server redirected without a code: {query.get('error', ['?'])[0]}")
        self._answers.append(
            AuthorizationCodeResult(
                code=query["code"][0], state=query.get("state", [None])[0], iss=query.get("iss", [None])[0]
            )
        )

    async def callback(self) -> AuthorizationCodeResult:
        return self._answers.pop(0)


def scenario_oauth(scenario: str, context: dict[str, Any]) -> dict[str, str] | None:
    """The `"hermes": {"oauth": ...}` an operator would configure for the scenario's server."""
    if not scenario.startswith("auth/"):
        return None
    if scenario == "auth/client-credentials-jwt":
        return {
            "grant": "client_credentials",
            "client_id": context["client_id"],
            "private_key": context["private_key_pem"],
            "signing_algorithm": context.get("signing_algorithm", "ES256"),
        }
    if scenario == "auth/client-credentials-basic":
        return {
            "grant": "client_credentials",
            "client_id": context["client_id"],
            "client_secret": context["client_secret"],
        }
    if "client_id" in context:
        return {"client_id": context["client_id"], "client_secret": context["client_secret"]}
    return {"client_metadata_url": CLIENT_METADATA_URL}


def server_config(url: str, scenario: str, context: dict[str, Any]) -> ServerConfig:
    """The scenario's server as an `mcpServers` entry, read by the product's configuration parser."""
    from agent.tools.config import mcp_config_parse

    # Generous: connecting includes the whole authorization (discovery, registration, the redirect).
    entry: dict[str, Any] = {"type": "http", "url": url, "timeout": 60}
    oauth = scenario_oauth(scenario, context)
    if oauth is not None:
        entry["hermes"] = {"oauth": oauth}
    # Named by its port: the suite runs scenarios at once, and each keeps its own credentials.
    name = f"conformance-{urlsplit(url).port}"
    [config] = mcp_config_parse({"mcpServers": {name: entry}}, source="conformance", default_timeout=60.0, environ={})
    return config


async def run(url: str) -> int:
    from agent.models import McpCredential
    from agent.tools.context import ToolCallContext
    from agent.tools.hub import ToolHub

    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    config = server_config(url, scenario, context)
    # Each scenario is a new server: nothing a previous one stored is presented to it.
    await McpCredential.objects.filter(server=config.name).adelete()
    hub = ToolHub([config], oauth_browser=HeadlessBrowser(), oauth_redirect_uri=REDIRECT_URI)
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
