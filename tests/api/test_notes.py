"""`/notes`: scripts write, list, read and change operators' notes, in the shape api/openapi.json
documents; what the Notes page refuses, they are refused too (400, nothing stored)."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
from django.test import Client
from pytest_django.fixtures import Settings

from agent.memory.notes import NoteDraft, note_create
from agent.models import Note
from api.openapi import openapi_document

pytestmark = pytest.mark.django_db(transaction=True)


def _valid(answer: dict[str, Any], schema_name: str) -> dict[str, Any]:
    document = openapi_document()
    schema = {"$ref": f"#/components/schemas/{schema_name}", "components": document["components"]}
    jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker()).validate(answer)
    return answer


def _post(client: Client, body: Any, path: str = "/notes") -> Any:
    return client.post(path, body, content_type="application/json")


def _error(answer: Any) -> dict[str, Any]:
    return _valid(answer.json(), "Error")["error"]


def test_a_note_posted_answers_201_with_the_note_and_where_it_is(client: Client) -> None:
    answer = _post(
        client,
        {
            "text": "## Sonarr\nIndexer timeouts clear with a restart; don't touch prowlarr.",
            "entities": ["service:sonarr"],
            "tags": ["http_timeout"],
            "runbook": True,
        },
    )

    assert answer.status_code == 201
    note = _valid(answer.json(), "Note")
    assert answer["Location"] == f"/notes/{note['id']}"
    assert (note["title"], note["entities"], note["tags"], note["runbook"], note["active"]) == (
        "Sonarr", ["service:sonarr"], ["http_timeout"], True, True,
    )  # fmt: skip
    assert note["author"].startswith("operator:") and note["source_session"] is None
    assert client.get(answer["Location"]).json() == note


@pytest.mark.parametrize(
    ("body", "code", "says"),
    [
        ({"entities": ["service:sonarr"]}, "invalid_note", '"text" is required'),
        ({"text": "   "}, "invalid_note", "A note needs text"),
        ({"text": "x", "entities": ["sonarr"]}, "invalid_note", "'sonarr' is not an entity"),
        ({"text": "x", "entities": "service:sonarr"}, "invalid_note", '"entities" must be a list of strings'),
        ({"text": "x", "tags": ["two words"]}, "invalid_note", "'two words' is not a tag"),
        ({"text": "x", "tags": None}, "invalid_note", '"tags" must be a list of strings'),
        ({"text": "x", "runbook": True}, "invalid_note", "A runbook needs what it is for"),
        ({"text": "x", "runbook": "yes"}, "invalid_note", '"runbook" must be true or false'),
        ({"text": "x" * 8001}, "invalid_note", "the limit is 8,000"),
        ({"text": "x", "entitys": ["service:sonarr"]}, "unknown_field", "entitys"),
        (["not", "an", "object"], "invalid_json", "must be a JSON object"),
    ],
)
def test_a_note_that_is_not_valid_answers_400_saying_what_and_stores_nothing(
    client: Client, body: Any, code: str, says: str
) -> None:
    answer = _post(client, body)

    assert answer.status_code == 400
    error = _error(answer)
    assert error["code"] == code and says in error["message"]
    assert Note.objects.count() == 0


def test_a_body_not_sent_as_json_is_refused(client: Client) -> None:
    answer = client.post("/notes", {"text": "x"})
    assert answer.status_code == 415 and _error(answer)["code"] == "unsupported_media_type"


@pytest.fixture
def written() -> dict[str, int]:
    def note(text: str, **scope: Any) -> int:
        return note_create(NoteDraft(text=text, **scope), author="operator:alice").pk

    return {
        "sonarr": note("sonarr restarts clear indexer timeouts", entities=["service:sonarr"], tags=["http_timeout"]),
        "media": note("media LXCs keep scratch on /mnt/scratch", entities=["lxc:media-*"]),
        "all": note("the homelab's DNS is pihole", entities=["*"]),
        "old": note("collabora after nextcloud upgrades", tags=["upgrade"], active=False),
    }


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("", ["old", "all", "media", "sonarr"]),
        ("?entity=lxc:media-1", ["all", "media"]),  # a glob, and `*`, cover the slug
        ("?entity=service:sonarr", ["all", "sonarr"]),
        ("?tag=http_timeout", ["sonarr"]),
        ("?active=false", ["old"]),
        ("?active=true&entity=service:jellyfin", ["all"]),
    ],
)
def test_notes_are_listed_by_entity_globs_included_tag_and_state(
    client: Client, written: dict[str, int], query: str, expected: list[str]
) -> None:
    answer = _valid(client.get(f"/notes{query}").json(), "NoteList")
    assert [note["id"] for note in answer["notes"]] == [written[name] for name in expected]
    assert answer["count"] == len(expected)


def test_a_bad_filter_or_id_is_a_400_and_an_unknown_note_a_404(client: Client, written: dict[str, int]) -> None:
    assert _error(client.get("/notes?active=maybe"))["code"] == "invalid_parameter"
    assert _error(client.get("/notes?active=0"))["code"] == "invalid_parameter"  # true or false, as documented
    assert _error(client.get("/notes/twelve"))["code"] == "invalid_note_id"
    missing = client.get("/notes/999999")
    assert missing.status_code == 404 and _error(missing)["code"] == "note_not_found"
    assert client.delete(f"/notes/{written['sonarr']}").status_code == 405


def test_patch_changes_only_the_fields_given(client: Client, written: dict[str, int]) -> None:
    path = f"/notes/{written['sonarr']}"
    answer = client.patch(path, {"active": False, "tags": ["http_timeout", "indexer"]}, content_type="application/json")

    note = _valid(answer.json(), "Note")
    assert answer.status_code == 200
    assert (note["active"], note["tags"], note["entities"]) == (False, ["http_timeout", "indexer"], ["service:sonarr"])
    assert note["text"] == "sonarr restarts clear indexer timeouts" and note["updated_by"].startswith("operator:")

    refused = client.patch(path, {"entities": ["nope"]}, content_type="application/json")
    assert refused.status_code == 400 and Note.objects.get(pk=written["sonarr"]).entities == ["service:sonarr"]
    gone = client.patch("/notes/999999", {"active": True}, content_type="application/json")
    assert gone.status_code == 404


def test_without_an_operator_nothing_is_read_or_written(client: Client, settings: Settings) -> None:
    settings.HERMES_AUTH = "django"  # nobody signed in

    assert client.get("/notes").status_code == 403
    assert _post(client, {"text": "sneaky"}).status_code == 403
    assert Note.objects.count() == 0
