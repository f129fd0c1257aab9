"""From incident to case: a finished session saved as an eval case file, for review.

The operator states the true answer or cause (`truth`); the session's questions become the case's
`ask` (or its `conversation`); every call it made to Oikos's tools, as the ledger kept it, becomes
the recorded world oikos_sim replays (`world.recorded`), so the case asks the same question of the
same answers. Built-in tools (the clock, notes) are not Oikos's and are not recorded.

Files go to `HERMES_EVALS_CASES_DIR` (default: the repository's `evals/cases/`): a deployed Hermes
may not be able to write into its own code, so it can be pointed at a directory that is reviewed
and copied into the repository. An existing file is never overwritten.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings

from agent.models import Activity, AgentSession, Message, Turn
from agent.tools.config import oikos_server_name
from evals.cases import (
    CASES_DIR,
    REQUEST_EXECUTION,
    Case,
    CaseInvalid,
    RecordedCall,
    case_dump,
    case_load,
    case_parse,
)

# A saved case's title and questions are capped, as a case file is read by people.
TITLE_MAX = 200


class CaseSaveRefused(ValueError):
    """The case was not written; the message says why, for the operator."""


def cases_dir() -> Path:
    """Where case files are read and saved: `HERMES_EVALS_CASES_DIR`, else the repository's `evals/cases/`."""
    configured = str(getattr(settings, "HERMES_EVALS_CASES_DIR", "") or "").strip()
    return Path(configured).expanduser() if configured else CASES_DIR


@dataclass(frozen=True)
class SessionDraft:
    """What a session offers a case: its questions, its Oikos calls, and whether it is finished."""

    session_id: uuid.UUID
    title: str
    questions: list[str]
    recorded: list[RecordedCall]
    tools: list[str]
    finished: bool

    @property
    def slug(self) -> str:
        return slug_from(self.title or (self.questions[0] if self.questions else "") or f"session-{self.session_id}")


def session_draft(*, session_id: uuid.UUID) -> SessionDraft | None:
    """The session as a case could take it, or None when there is no such session."""
    session = AgentSession.objects.filter(pk=session_id).first()
    if session is None:
        return None
    turns = list(Turn.objects.filter(session=session).order_by("started_at", "id"))
    questions = [question for question in (_question_of(turn) for turn in turns) if question]
    calls = (
        Activity.objects.filter(correlation_id__in=[turn.id for turn in turns], server=oikos_server_name())
        .exclude(state=Activity.State.STARTED)
        .order_by("started_at", "id")
    )
    recorded = [
        RecordedCall(
            tool=call.tool,
            arguments=dict(call.arguments or {}),
            result=result_as_seen(call.result),
            is_error=call.is_error,
        )
        for call in calls
    ]
    return SessionDraft(
        session_id=session.pk,
        title=str(session.title or "")[:TITLE_MAX],
        questions=questions,
        recorded=recorded,
        tools=list(dict.fromkeys(call.tool for call in recorded)),
        finished=bool(turns) and turns[-1].status == Turn.Status.DONE,
    )


def _question_of(turn: Turn) -> str:
    first = (
        Message.objects.filter(turn=turn, role=Message.Role.USER)
        .exclude(kind=Message.Kind.SUMMARY)
        .order_by("id")
        .values_list("content", flat=True)
        .first()
    )
    if not isinstance(first, list):
        return str(first or "").strip()
    return "\n".join(
        str(part.get("text", "")) for part in first if isinstance(part, dict) and part.get("type") == "text"
    ).strip()


def result_as_seen(stored: Any) -> Any:
    """A ledger row's result (`agent.conversation.results.tool_result_record`) as the model saw it:
    its text (parsed when it is JSON, as Oikos's tools answer), else its structured content."""
    if not isinstance(stored, dict):
        return stored
    texts = [
        str(item.get("text", ""))
        for item in stored.get("content", []) or []
        if isinstance(item, dict) and item.get("type") == "text"
    ]
    if texts:
        text = "\n".join(texts)
        try:
            return json.loads(text)
        except ValueError:
            return text
    if "structured_content" in stored:
        return stored["structured_content"]
    return stored


@dataclass(frozen=True)
class CaseForm:
    """What the operator states and picks when saving (the page's form, cleaned)."""

    truth: str
    title: str
    slug: str
    tags: list[str] = field(default_factory=list)
    facts: list[str] = field(default_factory=list)
    forbidden_claims: list[str] = field(default_factory=list)
    tools_required: list[str] = field(default_factory=list)


def case_build(draft: SessionDraft, form: CaseForm) -> Case:
    """The case the form and the session make, checked by the schema (`CaseSaveRefused` naming the fault)."""
    if not form.truth.strip():
        raise CaseSaveRefused("State the true answer or cause: it is what the case is judged against.")
    if not draft.questions:
        raise CaseSaveRefused("This session has no question to ask again.")
    question: dict[str, Any] = (
        {"ask": draft.questions[0]} if len(draft.questions) == 1 else {"conversation": draft.questions}
    )
    facts = form.facts or [form.truth.strip()]
    data: dict[str, Any] = {
        "title": form.title.strip()[:TITLE_MAX] or draft.title or f"session {draft.session_id}",
        "tags": form.tags,
        **question,
        "world": {"recorded": [call.model_dump(mode="json") for call in draft.recorded]},
        "expect": {
            "facts": facts,
            "forbidden_claims": form.forbidden_claims,
            "tools_required": form.tools_required,
            # A session that asked Oikos to act makes a case that asks for an action: else
            # `request_execution` would be both required and forbidden (evals/cases.py `Expect`).
            "action": REQUEST_EXECUTION in form.tools_required,
        },
        "source": f"session {draft.session_id}",
        "truth": form.truth.strip(),
    }
    try:
        case = Case.model_validate({**data, "id": form.slug})
    except ValueError as exc:
        raise CaseSaveRefused(_problem(exc)) from None
    # What the file will hold must load back as the same case.
    try:
        case_parse(case_dump(case), case_id=case.id)
    except CaseInvalid as exc:
        raise CaseSaveRefused(str(exc)) from None
    return case


def _problem(exc: ValueError) -> str:
    errors = getattr(exc, "errors", None)
    if callable(errors):
        return "; ".join(
            f"{'.'.join(str(part) for part in error['loc']) or 'case'}: {error['msg']}" for error in errors()
        )
    return str(exc)


def case_save(draft: SessionDraft, form: CaseForm, *, directory: Path | None = None) -> Path:
    """Write the case to `<directory>/<slug>.yaml` (never over an existing file); the path written."""
    case = case_build(draft, form)
    where = directory or cases_dir()
    try:
        where.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CaseSaveRefused(f"Cannot create {where} (HERMES_EVALS_CASES_DIR): {exc.strerror}") from None
    path = where / f"{case.id}.yaml"
    try:
        # "x": created here or not at all, even when two operators save the same name at once.
        with path.open("x", encoding="utf-8") as file:
            file.write(case_dump(case))
    except FileExistsError:
        raise CaseSaveRefused(f"{path} already exists: pick another name (files are never overwritten).") from None
    except OSError as exc:
        raise CaseSaveRefused(f"Cannot write {path} (HERMES_EVALS_CASES_DIR): {exc.strerror}") from None
    return path


def slug_from(text: str) -> str:
    """A case id from a title: lower-case words joined by '-', 3 to 60 characters."""
    words = re.findall(r"[a-z0-9]+", text.lower())
    slug = "-".join(words)[:60].strip("-")
    return slug if len(slug) >= 3 else f"case-{slug or 'saved'}"


@dataclass(frozen=True)
class CaseFile:
    """A case file as the list of cases shows it (or why it does not load)."""

    id: str
    title: str
    tags: list[str]
    source: str
    path: Path
    error: str = ""

    @property
    def session_id(self) -> uuid.UUID | None:
        """The session a saved case came from (`source: session <id>`), to link to."""
        prefix = "session "
        if not self.source.startswith(prefix):
            return None
        try:
            return uuid.UUID(self.source[len(prefix) :].strip())
        except ValueError:
            return None


def case_files(directory: Path | None = None) -> list[CaseFile]:
    """Every case file in the directory, sorted by id; a file that does not load is listed with its error."""
    where = directory or cases_dir()
    files: list[CaseFile] = []
    for path in sorted(where.glob("*.yaml")) if where.is_dir() else []:
        try:
            case = case_load(path)
        except (CaseInvalid, OSError) as exc:
            files.append(CaseFile(id=path.stem, title="", tags=[], source="", path=path, error=str(exc)))
            continue
        files.append(CaseFile(id=case.id, title=case.title, tags=list(case.tags), source=case.source, path=path))
    return files
