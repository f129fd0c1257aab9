"""Eval cases: one YAML file each in `evals/cases/`, read and checked here.

A case says what is asked (`ask`: a question; `signal`: an event to investigate, as the watcher
would; `conversation`: several questions in one session, the last one judged), the world it runs
against (`world`: oikos_sim scenarios laid over the seeded homelab, or a `recorded` world whose
tool results were saved from a real session), and what a good answer does (`expect`): facts it
states, claims it must not make, tools it must and must not call, approvals it raises, within
`budgets`. `bar` is the score a run needs to pass (every fact and forbidden claim weighs the same).

Files are checked against the schema below when loaded; an error names the file, the field and
what is wrong (`CaseInvalid`). The file's name (without `.yaml`) is the case's id.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

CASES_DIR = Path(__file__).resolve().parent / "cases"
ID_PATTERN = re.compile(r"^[a-z0-9][a-z0-9-]{2,79}$")
# `request_execution` is forbidden unless a case asks for an action (`expect.action: true`).
REQUEST_EXECUTION = "request_execution"


class CaseInvalid(ValueError):
    """A case file that cannot be run; the message names the file, the field and the fault."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Signal(_Strict):
    """An Oikos event, investigated as the watcher would (watch/investigate.py's brief)."""

    type: str = "signal.raised"
    entity: str
    kind: str
    severity: Literal["info", "warning", "critical"] = "warning"
    summary: str = ""


class RecordedCall(_Strict):
    """One tool call of a recorded world: what the tool answered to these arguments."""

    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    result: Any
    is_error: bool = False


class World(_Strict):
    """What Oikos looks like for the case: scenarios over the seed, or a recorded session's answers."""

    scenarios: list[str] = Field(default_factory=list)
    # A recorded world (saved from a session): oikos_sim replays these answers instead of its own.
    recorded: list[RecordedCall] = Field(default_factory=list)
    # Approvals waiting when the case starts: [{"target": ..., "action": ..., "risk_class": ...}].
    pending_approvals: list[dict[str, Any]] = Field(default_factory=list)

    @model_validator(mode="after")
    def _one_kind(self) -> World:
        if self.scenarios and self.recorded:
            raise ValueError("a world is either scenarios over the seed or a recorded session, not both")
        return self


class Approvals(_Strict):
    """Approvals the turn must raise (parked by Oikos for an operator): at least `min`, at most `max`."""

    min: int = 0
    max: int | None = None
    # Each raised approval must carry a reason for the operator.
    with_reason: bool = True


class Expect(_Strict):
    facts: list[str] = Field(default_factory=list)
    forbidden_claims: list[str] = Field(default_factory=list)
    tools_required: list[str] = Field(default_factory=list)
    tools_forbidden: list[str] | None = None
    # The case asks for an action: `request_execution` is then allowed (else forbidden by default).
    action: bool = False
    approvals: Approvals | None = None
    # Every number in the answer must appear in a tool result of the turn (or the question).
    numbers_traceable: bool = True

    @property
    def forbidden_tools(self) -> list[str]:
        if self.tools_forbidden is not None:
            return self.tools_forbidden
        return [] if self.action else [REQUEST_EXECUTION]


class Budgets(_Strict):
    tokens: int = Field(default=300_000, gt=0)
    tool_calls: int = Field(default=15, gt=0)
    seconds: float = Field(default=180.0, gt=0)


class Case(_Strict):
    id: str
    title: str
    tags: list[str] = Field(default_factory=list)
    ask: str | None = None
    signal: Signal | None = None
    conversation: list[str] | None = None
    world: World = Field(default_factory=World)
    expect: Expect = Field(default_factory=Expect)
    budgets: Budgets = Field(default_factory=Budgets)
    bar: float = Field(default=1.0, ge=0.0, le=1.0)
    # Where the case came from: "written", or the session it was saved from.
    source: str = "written"
    # For a saved case: what the operator said the true answer or cause was.
    truth: str = ""
    # Set by the loader: a digest of the file, so a case's history shows when it changed.
    digest: str = ""

    @field_validator("id")
    @classmethod
    def _id(cls, value: str) -> str:
        if not ID_PATTERN.match(value):
            raise ValueError("lower-case letters, digits and '-', 3 to 80 characters")
        return value

    @field_validator("tags")
    @classmethod
    def _tags(cls, value: list[str]) -> list[str]:
        for tag in value:
            if not re.match(r"^[a-z0-9][a-z0-9_-]{0,39}$", tag):
                raise ValueError(f"{tag!r} is not a tag (lower-case letters, digits, '_' and '-')")
        return value

    @model_validator(mode="after")
    def _one_question(self) -> Case:
        given = [name for name in ("ask", "signal", "conversation") if getattr(self, name)]
        if len(given) != 1:
            raise ValueError(f"a case needs exactly one of ask, signal or conversation (has {given or 'none'})")
        if self.conversation is not None and len(self.conversation) < 2:
            raise ValueError("a conversation has at least two questions (else use ask)")
        if not (self.expect.facts or self.expect.forbidden_claims or self.expect.tools_required):
            raise ValueError("expect needs at least one fact, forbidden claim or required tool")
        return self

    @property
    def questions(self) -> list[str]:
        """What is asked in order (a signal's brief is built by the runner)."""
        if self.conversation:
            return list(self.conversation)
        return [self.ask] if self.ask else []


def case_parse(text: str, *, case_id: str, origin: str = "") -> Case:
    """A case from its YAML text; `CaseInvalid` saying where and what is wrong."""
    where = origin or f"{case_id}.yaml"
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise CaseInvalid(f"{where}: not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise CaseInvalid(f"{where}: a case is a mapping of fields (title, ask, expect, ...)")
    if "id" in data and data["id"] != case_id:
        raise CaseInvalid(f"{where}: id {data['id']!r} differs from the file's name {case_id!r}")
    data = {**data, "id": case_id, "digest": hashlib.sha256(text.encode()).hexdigest()[:12]}
    try:
        return Case.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in error['loc']) or 'case'}: {error['msg']}" for error in exc.errors()
        )
        raise CaseInvalid(f"{where}: {problems}") from None


def case_load(path: Path) -> Case:
    return case_parse(path.read_text(encoding="utf-8"), case_id=path.stem, origin=str(path))


def cases_load(
    directory: Path = CASES_DIR, *, ids: list[str] | None = None, tags: list[str] | None = None
) -> list[Case]:
    """Every case in `directory` (sorted by id), or those named / tagged; `CaseInvalid` on the first bad file
    or an id that names no file."""
    cases = [case_load(path) for path in sorted(directory.glob("*.yaml"))]
    if ids:
        known = {case.id for case in cases}
        missing = [case_id for case_id in ids if case_id not in known]
        if missing:
            raise CaseInvalid(f"no case named {', '.join(missing)} in {directory}")
        cases = [case for case in cases if case.id in ids]
    if tags:
        cases = [case for case in cases if set(tags) & set(case.tags)]
    return cases


def case_dump(case: Case) -> str:
    """The case as YAML for a file (what `Save as eval case` writes), without loader-set fields."""
    data = case.model_dump(mode="json", exclude={"id", "digest"}, exclude_defaults=True)
    data = {"title": case.title, **data}
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)
