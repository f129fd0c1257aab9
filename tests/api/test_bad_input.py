"""Every malformed request answers a clear JSON 4xx and leaves the database exactly as it was."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import httpx2
import pytest

from tests.api.conftest import MAX_MESSAGE_CHARS, MAX_REQUEST_BYTES, Hermes

JSON = {"content-type": "application/json"}
FORM = {"content-type": "application/x-www-form-urlencoded"}


@dataclass(frozen=True)
class Bad:
    method: str
    path: str
    status: int
    code: str
    body: bytes | None = None
    headers: dict[str, str] | None = None
    chunked: bool = False

    def send(self, url: str) -> httpx2.Response:
        content: bytes | Iterator[bytes] | None = self.body
        if self.chunked and self.body is not None:
            # A generator body goes out chunked, without a Content-Length to check up front.
            content = iter([self.body[i : i + 4096] for i in range(0, len(self.body), 4096)])
        headers = JSON if self.headers is None else self.headers
        return httpx2.request(self.method, f"{url}{self.path}", content=content, headers=headers, timeout=30)


def _nested(depth: int) -> bytes:
    return b'{"message": "hi", "session_id": ' + b"[" * depth + b"]" * depth + b"}"


CASES = {
    # POST /chat
    "malformed JSON": Bad("POST", "/chat", 400, "invalid_json", b'{"message": "hi"'),
    "empty body": Bad("POST", "/chat", 400, "invalid_json", b""),
    "not UTF-8": Bad("POST", "/chat", 400, "invalid_json", b'{"message": "\xff\xfe"}'),
    "JSON array": Bad("POST", "/chat", 400, "invalid_json", b'["what is degraded?"]'),
    "NaN": Bad("POST", "/chat", 400, "invalid_json", b'{"message": "hi", "session_id": NaN}'),
    "number out of range": Bad("POST", "/chat", 400, "invalid_json", b'{"message": "hi", "x": 1e999}'),
    "missing message": Bad("POST", "/chat", 400, "invalid_message", b'{"session_id": null}'),
    "message not a string": Bad("POST", "/chat", 400, "invalid_message", b'{"message": ["hi"]}'),
    "blank message": Bad("POST", "/chat", 400, "invalid_message", b'{"message": "  \\n\\t "}'),
    "NUL in message": Bad("POST", "/chat", 400, "invalid_text", b'{"message": "hi\\u0000there"}'),
    "lone surrogate": Bad("POST", "/chat", 400, "invalid_text", b'{"message": "hi \\ud800"}'),
    "unknown field": Bad("POST", "/chat", 400, "unknown_field", b'{"message": "hi", "sesion_id": "x"}'),
    "malformed session_id": Bad("POST", "/chat", 400, "invalid_session_id", b'{"message": "hi", "session_id": "42"}'),
    "session_id a number": Bad("POST", "/chat", 400, "invalid_session_id", b'{"message": "hi", "session_id": 42}'),
    "unknown session_id": Bad(
        "POST", "/chat", 404, "session_not_found", f'{{"message": "hi", "session_id": "{uuid.uuid4()}"}}'.encode()
    ),
    "oversized message": Bad(
        "POST", "/chat", 413, "message_too_large", b'{"message": "' + b"a" * (MAX_MESSAGE_CHARS + 1) + b'"}'
    ),
    "oversized body": Bad(
        "POST", "/chat", 413, "request_too_large", b'{"message": "hi", "pad": "' + b"a" * MAX_REQUEST_BYTES + b'"}'
    ),
    "oversized chunked body": Bad(
        "POST", "/chat", 413, "request_too_large", b'{"message": "' + b"a" * MAX_REQUEST_BYTES + b'"}', chunked=True
    ),
    "nested too deep": Bad("POST", "/chat", 400, "json_too_deep", _nested(40)),
    "form-encoded": Bad("POST", "/chat", 415, "unsupported_media_type", b"message=hi", FORM),
    "no content type": Bad("POST", "/chat", 415, "unsupported_media_type", b'{"message": "hi"}', {}),
    "GET /chat": Bad("GET", "/chat", 405, "method_not_allowed"),
    # POST /query (refused before any tool is called, so not even the ledger changes)
    "query without tool": Bad("POST", "/query", 400, "tool_required", b'{"args": {"slug": "service:caddy"}}'),
    "query in plain language": Bad("POST", "/query", 400, "tool_required", b'{"message": "what is degraded?"}'),
    "query unknown tool": Bad("POST", "/query", 404, "unknown_tool", b'{"tool": "reboot_everything"}'),
    "query args not an object": Bad("POST", "/query", 400, "invalid_args", b'{"tool": "whoami", "args": [1]}'),
    "query tool not a string": Bad("POST", "/query", 400, "invalid_tool", b'{"tool": 7}'),
    "query malformed JSON": Bad("POST", "/query", 400, "invalid_json", b"{tool: get_entity}"),
    "query unknown field": Bad("POST", "/query", 400, "unknown_field", b'{"tool": "get_health_summary", "argz": {}}'),
    # GET /sessions
    "session id not a UUID": Bad("GET", "/sessions/not-a-uuid", 400, "invalid_session_id"),
    "unknown session": Bad("GET", f"/sessions/{uuid.uuid4()}", 404, "session_not_found"),
    "page zero": Bad("GET", "/sessions?page=0", 400, "invalid_parameter"),
    "page not a number": Bad("GET", "/sessions?page=two", 400, "invalid_parameter"),
    "page size too large": Bad("GET", "/sessions?page_size=101", 400, "invalid_parameter"),
    "page past the end": Bad("GET", "/sessions?page=100000", 404, "page_out_of_range"),
    "DELETE a session": Bad("DELETE", f"/sessions/{uuid.uuid4()}", 405, "method_not_allowed"),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_answers_a_json_4xx_and_stores_nothing(hermes: Hermes, case: Bad) -> None:
    before = hermes.database.counts()
    asked = len(hermes.model.requests)

    response = case.send(hermes.url)

    assert (response.status_code, response.headers["content-type"]) == (case.status, "application/json")
    error = response.json()["error"]
    assert error["code"] == case.code
    assert len(error["message"]) > 10
    assert hermes.database.counts() == before
    assert len(hermes.model.requests) == asked, "a refused request must never reach the model"


def test_a_405_names_the_allowed_methods(hermes: Hermes) -> None:
    response = httpx2.put(f"{hermes.url}/query", json={"tool": "whoami"})
    assert response.status_code == 405 and response.headers["allow"] == "POST"
