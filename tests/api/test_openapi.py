"""The shipped OpenAPI document is true: it lists exactly the live routes, and schemathesis, generating
requests from it against Daphne, finds no 5xx and no response that contradicts it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
from django.urls import URLPattern, URLResolver, get_resolver

from api.openapi import openapi_document
from tests.api.conftest import Hermes, chat
from tests.fakes.scripted_models import DegradedInvestigator

# Per operation: enough to hit every documented branch, few enough that /chat's real turns stay cheap.
EXAMPLES = 20


def _api_routes() -> set[str]:
    """The API's routes as OpenAPI paths (`sessions/<str:session_id>` → `/sessions/{session_id}`)."""
    resolver = next(
        entry for entry in get_resolver().url_patterns if isinstance(entry, URLResolver) and entry.app_name == "api"
    )
    routes = set()
    for pattern in resolver.url_patterns:
        assert isinstance(pattern, URLPattern)
        route = str(pattern.pattern)
        for converter in ("str:", "uuid:", "int:", "slug:", "path:"):
            route = route.replace(f"<{converter}", "<")
        routes.add("/" + route.replace("<", "{").replace(">", "}"))
    return routes


def test_the_document_describes_exactly_the_routes_served() -> None:
    assert set(openapi_document()["paths"]) == _api_routes()


def test_every_operation_documents_its_errors_as_json() -> None:
    document = openapi_document()
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            for status, response in operation["responses"].items():
                if status.startswith(("4", "5")):
                    assert "application/json" in response["content"], f"{method.upper()} {path} {status}"


def test_schemathesis_finds_no_5xx_and_no_answer_the_document_does_not_allow(hermes: Hermes, tmp_path: Path) -> None:
    """Every phase (examples, coverage, fuzzing, stateful) and every check, in the tool's own CLI."""
    command = [str(Path(sys.executable).with_name("schemathesis")), "--no-color"]
    command += ["--config-file", str(Path(__file__).with_name("schemathesis.toml"))]
    command += ["run", f"{hermes.url}/openapi.json", "--checks", "all", "--max-examples", str(EXAMPLES)]
    command += ["--seed", "4", "--workers", "1", "--request-timeout", "30"]
    run = subprocess.run(
        command,
        cwd=tmp_path,  # where it keeps its crash cache
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout[-20000:] + run.stderr[-5000:]


def test_a_turn_with_tool_calls_streams_only_documented_events(hermes: Hermes) -> None:
    """Schemathesis sees short answers only; this turn also streams tool_use and tool_result."""
    hermes.model.responder = DegradedInvestigator()
    stream = chat(hermes.url, {"message": "what's degraded and what depends on it?"})

    document = openapi_document()
    validator = jsonschema.Draft202012Validator(
        {"$ref": "#/components/schemas/ChatStreamEvent", "components": document["components"]}
    )
    assert {event.event for event in stream.events} == {"tool_use", "tool_result", "text", "done"}
    for event in stream.events:
        raw = {"event": event.event, "id": event.id, "data": json.dumps(event.data)}
        validator.validate(raw)
        # contentSchema is an annotation to JSON Schema validators: check the data itself too.
        jsonschema.validate(
            event.data, {"$ref": "#/components/schemas/TurnEvent", "components": document["components"]}
        )
        assert event.data["type"] == event.event
