"""Malformed input against a real Daphne: the A2A routes (both dialects, every binding) and the
websocket answer every case with a refusal — never a 5xx, a 1011 close or a traceback — and a flood
of them leaves a few log lines, not one traceback each.

The cases are generated from a fixed seed (so a failure reproduces): JSON nested past any limit,
bodies that are not UTF-8 (or are UTF-16/32, or carry a NUL or a lone surrogate), numbers JSON
cannot hold, media types that are not JSON, valid requests with one field replaced by something
else, bodies over the size limit, paths nobody serves, and on the websocket: unknown paths, the
`Daphne-Root-Path` header, odd query strings, garbage and oversized frames.
"""

from __future__ import annotations

import json
import random
import re
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx2
import pytest

from access.refusal_logs import LINES_PER_WINDOW
from tests.fakes import FakeAnthropic, Reply
from tests.fakes.daphne import DaphneServer, LiveDatabase
from tests.fakes.subprocesses import clean_environ
from tests.interop.processes import pairing_tokens
from tests.security.raw_websocket import (
    BINARY,
    TEXT,
    websocket_close_code,
    websocket_close_send,
    websocket_open,
    websocket_send_frame,
)

SEED = 14
MAX_BODY = 64 * 1024
# Every table a request could write to; a refused request must leave all of them as they were.
TABLES = (
    "agent_sessions",
    "agent_turns",
    "agent_messages",
    "agent_activity",
    "interop_peer_conversations",
    "interop_peer_exchanges",
    "interop_a2a_tasks",
    "controlroom_approval_decisions",
)


@dataclass
class Hermes:
    server: DaphneServer
    database: LiveDatabase
    token: str

    def counts(self) -> dict[str, int]:
        return {table: self.database.query(f"SELECT COUNT(*) FROM {table}")[0][0] for table in TABLES}


@pytest.fixture(scope="module")
def hermes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hermes]:
    directory = tmp_path_factory.mktemp("edge-fuzz")
    database = LiveDatabase.create(directory, name="fuzz")
    token = pairing_tokens("fuzzer", env={**clean_environ(), "DATABASE_URL": database.url})["fuzzer"]
    # A model, so that a case the mutations left valid is answered (200), as in real use.
    model = FakeAnthropic().start()
    model.responder = lambda body: Reply.text("Noted.")
    env = {
        **model.env(),
        "HERMES_MAX_REQUEST_BYTES": str(MAX_BODY),
        "HERMES_A2A_MAX_BODY_BYTES": str(MAX_BODY),
        "HERMES_LOG_LEVEL": "INFO",
    }
    try:
        with DaphneServer(database=database, env=env, log_path=directory / "daphne.log") as server:
            yield Hermes(server=server, database=database, token=token)
    finally:
        model.stop()
        database.drop()


# --- the cases -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    name: str
    method: str
    path: str
    body: bytes = b""
    content_type: str | None = "application/json"


def _jsonrpc(params: Any, method: str = "SendMessage") -> Any:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}


def _a2a_message(text: Any) -> Any:
    return {"message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": text}]}}


def _garraia_task(text: Any) -> Any:
    return {"id": "fuzz-1", "message": {"role": "user", "parts": [{"type": "text", "text": text}]}}


# Where each template goes; every one is a valid request before it is broken.
TEMPLATES: list[tuple[str, str, Any]] = [
    ("POST", "/a2a/jsonrpc", _jsonrpc(_a2a_message("hello"))),
    ("POST", "/a2a/jsonrpc", _jsonrpc({"id": "task-1"}, method="GetTask")),
    ("POST", "/a2a/jsonrpc", {"jsonrpc": "2.0", "id": 2, "method": "message/send", "params": _a2a_message("hi")}),
    ("POST", "/a2a/rest/message:send", _a2a_message("hello")),
    ("POST", "/a2a/rest/v1/message:send", _a2a_message("hello")),
    ("POST", "/a2a/rest/tasks/task-1:cancel", {"id": "task-1"}),
    ("POST", "/a2a/tasks", _garraia_task("hello")),
    ("POST", "/a2a/tasks/fuzz-1/cancel", {}),
]


def _deep(depth: int, kind: str) -> str:
    if kind == "array":
        return "[" * depth + "]" * depth
    return '{"a":' * depth + "1" + "}" * depth


def _strange_values(rng: random.Random) -> list[Any]:
    return [
        None,
        0,
        -1,
        2**70,
        1.5e308,
        True,
        "",
        "\x00",
        "x" * rng.randint(1, 3000),
        [],
        {},
        [[[["nested"]]]],
        {"text": {"text": None}},
        "💥" * 50,
        "\u202e\u200b",
    ]


def _mutations(template: Any, rng: random.Random) -> Iterator[Any]:
    """The template with one node (picked at random) replaced by each strange value in turn."""
    paths: list[list[Any]] = []

    def walk(node: Any, path: list[Any]) -> None:
        paths.append(path)
        if isinstance(node, dict):
            for key, value in node.items():
                walk(value, [*path, key])
        elif isinstance(node, list):
            for index, value in enumerate(node):
                walk(value, [*path, index])

    walk(template, [])
    for value in _strange_values(rng):
        path = rng.choice(paths)
        copy = json.loads(json.dumps(template))
        if not path:
            yield value
            continue
        target = copy
        for step in path[:-1]:
            target = target[step]
        target[path[-1]] = value
        yield copy


def http_cases() -> list[Case]:
    rng = random.Random(SEED)
    cases: list[Case] = []
    for method, path, template in TEMPLATES:
        text = json.dumps(template)
        for depth in (33, 200, 5000, 30000):
            for kind in ("array", "object"):
                nested = text.replace('"hello"', _deep(depth, kind)) if '"hello"' in text else _deep(depth, kind)
                cases.append(Case(f"nested {kind} x{depth}", method, path, nested.encode()))
        encodings = {
            "latin-1 with high bytes": text.replace("hello", "h\xe9llo\xff").encode("latin-1"),
            "UTF-16": text.encode("utf-16"),
            "UTF-32": text.encode("utf-32"),
            "truncated UTF-8": text.encode()[:-2] + b"\xc3",
            "overlong slash": text.encode().replace(b"hello", b"\xc0\xaf"),
            "UTF-8 surrogate bytes": text.encode().replace(b"hello", b"\xed\xa0\x80"),
            "UTF-8 BOM": b"\xef\xbb\xbf" + text.encode(),
            "raw NUL byte": text.encode().replace(b"hello", b"he\x00llo"),
            "random bytes": rng.randbytes(512),
        }
        cases += [Case(name, method, path, body) for name, body in encodings.items()]
        literals = {
            "escaped NUL": text.replace("hello", "he\\u0000llo"),
            "lone surrogate": text.replace("hello", "\\ud800"),
            "NaN": text.replace('"hello"', "NaN"),
            "Infinity": text.replace('"hello"', "-Infinity"),
            "1e999": text.replace('"hello"', "1e999"),
            "5000-digit integer": text.replace('"hello"', "9" * 5000),
            "truncated JSON": text[: len(text) // 2],
            "trailing garbage": text + "}}}",
            "duplicate keys": text[:-1] + ', "jsonrpc": "1.0"}',
            "JSON scalar": "42",
            "JSON string": '"hello"',
            "JSON null": "null",
            "JSON array": f"[{text}, {text}]",
            "whitespace only": " \n\t ",
        }
        cases += [Case(name, method, path, body.encode()) for name, body in literals.items()]
        for media_type in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", ""):
            cases.append(Case(f"as {media_type or 'no media type'}", method, path, text.encode(), media_type or None))
        cases += [
            Case(f"mutated #{index}", method, path, json.dumps(body).encode())
            for index, body in enumerate(_mutations(template, rng))
        ]
        cases.append(Case("over the size limit", method, path, b'{"a": "' + b"x" * (MAX_BODY + 10) + b'"}'))
    unknown = [
        "/a2a/",
        "/a2a/nothing",
        "/a2a/jsonrpc/extra",
        "/a2a/rest/",
        "/a2a/rest/v9/message:send",
        "/a2a/rest/tasks/%ff",
        "/a2a/rest/tasks/..%2f..%2fadmin",
        "/a2a/tasks/" + "x" * 2000,
        "/a2a/tasks/%00/cancel",
        "/a2a/tasks/a%0Ab",
        "/.well-known/agent-card.json/..",
        "/.well-known/nothing.json",
    ]
    for path in unknown:
        for method in ("GET", "POST", "PUT", "DELETE"):
            cases.append(Case(f"unknown {method}", method, path, b"{}"))
    for path in ("/.well-known/agent-card.json", "/.well-known/agent.json"):
        cases.append(Case("card with a body", "GET", path, b"\xff\xfe"))
        cases.append(Case("card by POST", "POST", path, b"[]"))
    return cases


# --- the tests -------------------------------------------------------------------------------------


def _log_lines(log: str) -> list[str]:
    """Hermes's own log lines (Daphne's access log, one line per request, left out)."""
    return [line for line in log.splitlines() if not re.match(r"^\S+:\d+ - - \[", line)]


def test_a_malformed_request_leaves_one_short_line_in_the_log(hermes: Hermes) -> None:
    """What used to write a kilobyte of traceback each: a malformed JSON-RPC request, a foreign Host.

    First in the module on purpose: after the fuzz below, this minute's lines are used up.
    """
    headers = {"Authorization": f"Bearer {hermes.token}", "Content-Type": "application/json"}
    malformed = json.dumps(_jsonrpc({"message": {"parts": [{"text": 5}], "role": "nope"}}))
    for attempt in (
        lambda: httpx2.post(f"{hermes.server.url}/a2a/jsonrpc", content=malformed, headers=headers),
        lambda: httpx2.get(f"{hermes.server.url}/ui/", headers={"Host": "evil.example"}),
    ):
        before = len(hermes.server.log())
        response = attempt()
        assert response.status_code < 500
        written = _log_lines(hermes.server.log()[before:])
        print(f"{response.request.method} {response.request.url.path}: {sum(len(line) + 1 for line in written)} bytes")
        assert "Traceback" not in "\n".join(written)
        assert 1 <= len(written) <= 2, written
        assert sum(len(line) + 1 for line in written) < 800, written


def test_no_malformed_http_request_to_the_a2a_routes_gets_a_5xx(hermes: Hermes) -> None:
    cases = http_cases()
    statuses: Counter[int] = Counter()
    failures: list[str] = []
    log_before = len(hermes.server.log())
    started = time.monotonic()
    with httpx2.Client(base_url=hermes.server.url, timeout=30) as client:
        for case in cases:
            headers = {"Authorization": f"Bearer {hermes.token}"}
            if case.content_type is not None:
                headers["Content-Type"] = case.content_type
            before = hermes.counts()
            response = client.request(case.method, case.path, content=case.body, headers=headers)
            statuses[response.status_code] += 1
            where = f"{case.name} {case.method} {case.path[:60]}"
            if response.status_code >= 500:
                failures.append(f"{where}: {response.status_code} {response.text[:200]}")
            refused = response.status_code >= 400 or _jsonrpc_error(response)
            if refused and hermes.counts() != before:
                failures.append(f"{where}: refused, but wrote rows")
    elapsed = time.monotonic() - started
    log = hermes.server.log()[log_before:]
    lines = _log_lines(log)
    print(
        f"{len(cases)} requests in {elapsed:.1f} s: {dict(sorted(statuses.items()))}; "
        f"{len(lines)} log lines ({len(log.encode()):,} bytes with the access log)"
    )

    assert not failures, "\n".join(failures)
    assert "Traceback" not in log
    # One line per refusal, but only so many a minute per kind: a flood shows, and does not fill the disk.
    windows = int(elapsed // 60) + 2
    assert len([line for line in lines if " access " in line]) <= LINES_PER_WINDOW * windows
    assert len([line for line in lines if " a2a." in line]) <= LINES_PER_WINDOW * windows
    assert all(len(line) < 600 for line in lines), max(lines, key=len)


def _jsonrpc_error(response: httpx2.Response) -> bool:
    try:
        return "error" in response.json() and response.json().get("jsonrpc") == "2.0"
    except ValueError:
        return False


WEBSOCKET_UNKNOWN = [
    "/ws/",
    "/ws/ui",
    "/ws/ui/extra/",
    "/ws/other/",
    "/",
    "/admin/",
    "/a2a/jsonrpc",
    "/.well-known/agent-card.json",
    "/ws/%ff/",
    "/ws/" + "a" * 3000 + "/",
    "/ws/%00/",
]
WEBSOCKET_QUERIES = [
    "?session=../../etc",
    "?session=%ff%fe",
    "?session=" + "1" * 2000,
    "?rail=maybe&approvals=&sessions=%00",
    "?session=00000000-0000-0000-0000-000000000000",
    "?" + "&".join(f"k{i}=v" for i in range(500)),
]


def test_no_websocket_path_or_frame_gets_a_server_error(hermes: Hermes) -> None:
    url = hermes.server.url
    log_before = len(hermes.server.log())
    outcomes: list[tuple[str, int, int | None]] = []

    for path in WEBSOCKET_UNKNOWN:
        handshake = websocket_open(url, path, origin=url)
        try:
            outcomes.append((path, handshake.status, None))
            assert handshake.status == 403, (path, handshake.status)
        finally:
            handshake.close()

    def opened(path: str, **kwargs: Any) -> Any:
        handshake = websocket_open(url, path, origin=url, **kwargs)
        assert handshake.status == 101, (path, handshake.status)
        return handshake

    # A client's Daphne-Root-Path changed the route (and made the router raise): it changes nothing now.
    frames: list[tuple[str, str, bytes, int]] = [
        ("/ws/ui/", "garbage text", b"\x00garbage{", TEXT),
        ("/ws/ui/", "deep JSON", _deep(20000, "array").encode(), TEXT),
        ("/ws/ui/", "binary", bytes(range(256)), BINARY),
        ("/ws/ui/", "invalid UTF-8 text", b"\xff\xfe\xc3", TEXT),
        ("/ws/ui/", "oversized", b"a" * (MAX_BODY + 1), TEXT),
    ]
    for query in WEBSOCKET_QUERIES:
        frames.append((f"/ws/ui/{query}", "hello", b"{}", TEXT))
    for path, name, payload, opcode in frames:
        handshake = opened(path, headers=(("Daphne-Root-Path", "/evil"),))
        try:
            websocket_send_frame(handshake, payload, opcode=opcode)
            if name != "oversized":  # that one the server closes itself; ours could overtake it
                websocket_close_send(handshake)
            code = websocket_close_code(handshake)
        finally:
            handshake.close()
        outcomes.append((f"{path[:40]} {name}", 101, code))
        # 1000: our own close answered; 4009: the size limit; invalid UTF-8 is the server's websocket
        # layer's to refuse (it drops the connection, or closes with 1007). Never 1011, an
        # application that crashed.
        closes: dict[str, set[int | None]] = {"oversized": {4009}, "invalid UTF-8 text": {None, 1007}}
        expected = closes.get(name, {1000})
        assert code in expected, (path, name, code)
    log = hermes.server.log()[log_before:]
    print(outcomes)
    assert "Traceback" not in log
    assert "Exception inside application" not in log


def test_a_client_sent_root_path_changes_no_url(hermes: Hermes) -> None:
    """Daphne turns a `Daphne-Root-Path` header into the ASGI root_path; Hermes clears it."""
    headers = {"Daphne-Root-Path": "/evil"}
    card = httpx2.get(f"{hermes.server.url}/.well-known/agent-card.json", headers=headers)
    garraia_card = httpx2.get(f"{hermes.server.url}/.well-known/agent.json", headers=headers)
    home = httpx2.get(f"{hermes.server.url}/", headers=headers)
    page = httpx2.get(f"{hermes.server.url}/ui/", headers=headers)

    assert card.status_code == garraia_card.status_code == page.status_code == 200
    assert "/evil" not in card.text and "/evil" not in garraia_card.text
    assert home.headers["location"] == "/ui/"
    assert "/evil" not in page.text
