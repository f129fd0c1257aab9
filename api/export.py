"""`GET /sessions/<id>/export.md` and `/export.json`: a session as an incident note, or its facts as JSON.

The Markdown comes as an attachment (`hermes-<title>-<date>.md`) for the wiki or the household
chat; the JSON is the same facts for tools. `?format=json` on `export.md` (or `?format=md` on
`export.json`) picks the other. The note is built by `transcript.export`, which owns the reading
of transcripts and approval decisions; the escalation is added here (`export_read`), since an
investigation's lives in `watch`, above `transcript`.
"""

from __future__ import annotations

import re
import uuid

from channels.db import database_sync_to_async
from django.http import HttpRequest, HttpResponse, JsonResponse

from api.bodies import session_id_parse
from api.errors import ApiError, api_view
from transcript.export import EscalationFact, SessionExport, session_export
from transcript.export_markdown import session_markdown
from watch.investigate import escalation_parse
from watch.models import Investigation

FORMATS = ("md", "json")


@api_view("GET")
async def session_export_markdown(request: HttpRequest, session_id: str) -> HttpResponse:
    return await _export(request, session_id, default="md")


@api_view("GET")
async def session_export_json(request: HttpRequest, session_id: str) -> HttpResponse:
    return await _export(request, session_id, default="json")


async def _export(request: HttpRequest, session_id: str, *, default: str) -> HttpResponse:
    wanted = request.GET.get("format", default)
    if wanted not in FORMATS:
        raise ApiError(400, "invalid_parameter", "format must be md or json.")
    parsed = session_id_parse(session_id)
    export = await database_sync_to_async(export_read)(session_id=parsed)
    if export is None:
        raise ApiError(404, "session_not_found", f"There is no session with id {parsed}.")
    if wanted == "json":
        return JsonResponse(export.as_json())
    response = HttpResponse(session_markdown(export), content_type="text/markdown; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{export_filename(export)}"'
    return response


def export_filename(export: SessionExport) -> str:
    """`hermes-<title words>-<date>.md`: ASCII only, so every browser and header parser keeps it."""
    words = re.sub(r"[^a-z0-9]+", "-", export.title.lower()).strip("-")[:50].rstrip("-") or "session"
    return f"hermes-{words}-{export.created_at:%Y-%m-%d}.md"


def export_read(*, session_id: uuid.UUID) -> SessionExport | None:
    """The session's export with its escalation: the investigation's, or the final answer's section."""
    export = session_export(session_id=session_id)
    if export is None:
        return None
    return export.with_escalation(_escalation(export))


def _escalation(export: SessionExport) -> EscalationFact | None:
    investigation = Investigation.objects.filter(session_id=export.id).first()
    if investigation is not None:
        # Empty while its turn runs, and when the turn was cut off before it escalated.
        stored = investigation.escalation or {}
        return EscalationFact(
            source="investigation",
            summary=str(stored.get("summary") or ""),
            impact=str(stored.get("impact") or ""),
            likely_cause=str(stored.get("likely_cause") or ""),
            next_step=str(stored.get("next_step") or ""),
            entity=investigation.entity,
            event=str(investigation.event.get("type") or investigation.kind),
            state=investigation.state,
        )
    # Any answer may end with the section an investigation is asked for (watch/investigate.py).
    if "## escalation" not in export.final_answer.lower():
        return None
    parsed = escalation_parse(export.final_answer)
    return EscalationFact(
        source="answer",
        summary=parsed.get("summary", ""),
        impact=parsed.get("impact", ""),
        likely_cause=parsed.get("likely_cause", ""),
        next_step=parsed.get("next_step", ""),
    )
