"""The HTTP API's routes, mounted at the root (behind a proxy prefix, see `HERMES_URL_PREFIX`)."""

from __future__ import annotations

from django.urls import path

from api.changes import changes
from api.chat import chat
from api.elicitations import elicitation_answer, elicitation_list
from api.export import session_export_json, session_export_markdown
from api.health import healthz
from api.notes import note_detail, notes
from api.openapi import openapi
from api.query import query
from api.search import search
from api.sessions import session_detail, session_list
from api.turn_events import turn_events
from api.turns import turn_stop

app_name = "api"

urlpatterns = [
    path("chat", chat, name="chat"),
    path("sessions", session_list, name="sessions"),
    path("sessions/<str:session_id>", session_detail, name="session"),
    path("sessions/<str:session_id>/export.md", session_export_markdown, name="session_export_md"),
    path("sessions/<str:session_id>/export.json", session_export_json, name="session_export_json"),
    path("turns/<str:turn_id>/stop", turn_stop, name="turn_stop"),
    path("turns/<str:turn_id>/events", turn_events, name="turn_events"),
    path("elicitations", elicitation_list, name="elicitations"),
    path("elicitations/<str:elicitation_id>", elicitation_answer, name="elicitation_answer"),
    path("query", query, name="query"),
    path("search", search, name="search"),
    path("changes", changes, name="changes"),
    path("notes", notes, name="notes"),
    path("notes/<str:note_id>", note_detail, name="note"),
    path("healthz", healthz, name="healthz"),
    path("openapi.json", openapi, name="openapi"),
]
