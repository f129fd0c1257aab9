"""`ask`'s answers to an MCP server's questions (elicitation): a prompt per field on the terminal.

The prompts go to stderr and the answers come from stdin, so `ask ... > answer.md` still keeps only
the answer. Without a terminal (a pipe, cron) or with `--no-input`, every question is declined at
once and the reason is recorded: a script must never hang on a question nobody will see.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from typing import TextIO

from agent.elicitation.types import (
    ElicitationAnswer,
    ElicitationRecord,
    ElicitContentError,
    ElicitField,
    elicit_content_validate,
)

NO_INPUT = "Declined by Hermes: `ask` ran with --no-input."
NOT_INTERACTIVE = "Declined by Hermes: `ask` was not run on a terminal, so nobody could be asked."


class TerminalAnswerer:
    def __init__(self, *, no_input: bool, stdin: TextIO | None = None, err: TextIO | None = None) -> None:
        self.stdin = stdin or sys.stdin
        self.err = err or sys.stderr
        self.refusal = NO_INPUT if no_input else ("" if _interactive(self.stdin) else NOT_INTERACTIVE)
        self.operator = "operator:cli"

    async def __call__(self, record: ElicitationRecord) -> ElicitationAnswer:
        if self.refusal:
            return ElicitationAnswer(action="decline", reason=self.refusal)
        ask = record.ask
        if ask.purpose == "confirmation":
            return await self._confirm(record)
        self._say(f"\n[question] {ask.server} asks (during {ask.tool or 'a tool call'}):\n  {_one_line(ask.message)}\n")
        choice = await self._read(f"Answer it? [Y]es / [n]o (decline) / [c]ancel, within {record.timeout:.0f} s: ")
        if choice is None or choice.strip().lower() in ("c", "cancel"):
            return ElicitationAnswer(action="cancel", answered_by=self.operator)
        if choice.strip().lower() in ("n", "no", "d", "decline"):
            return ElicitationAnswer(action="decline", answered_by=self.operator)
        values: dict[str, str] = {}
        for field in ask.fields:
            while True:
                text = await self._read(_prompt(field))
                if text is None:
                    return ElicitationAnswer(action="cancel", answered_by=self.operator)
                text = text.strip()
                if not text and field.default is not None:
                    text = _default_text(field)
                try:
                    elicit_content_validate((field,), {field.name: text} if text else {}, from_form=True)
                except ElicitContentError as problem:
                    self._say(f"  {problem.errors.get(field.name, str(problem))}\n")
                    continue
                if text:
                    values[field.name] = text
                break
        content = elicit_content_validate(ask.fields, values, from_form=True)
        return ElicitationAnswer(action="accept", content=content, answered_by=self.operator)

    async def _confirm(self, record: ElicitationRecord) -> ElicitationAnswer:
        """Hermes's own question before an execution (`agent.engine.actions`): only "yes" runs it."""
        ask = record.ask
        self._say(f"\n[confirm] Hermes asks before running {ask.server}/{ask.tool}:\n  {_one_line(ask.message)}\n")
        choice = await self._read(f"Run it? [y]es / [N]o, within {record.timeout:.0f} s: ")
        if choice is not None and choice.strip().lower() in ("y", "yes"):
            return ElicitationAnswer(action="accept", content={}, answered_by=self.operator)
        return ElicitationAnswer(action="decline", answered_by=self.operator)

    def _say(self, text: str) -> None:
        self.err.write(text)
        self.err.flush()

    async def _read(self, prompt: str) -> str | None:
        """One line from stdin (None at end of input). Read in a daemon thread, so a question left
        unanswered when Hermes gives up on it cannot keep the process from exiting."""
        self._say(prompt)
        loop = asyncio.get_running_loop()
        line: asyncio.Future[str] = loop.create_future()

        def deliver(text: str) -> None:
            if not line.done():
                line.set_result(text)

        def read() -> None:
            loop.call_soon_threadsafe(deliver, self.stdin.readline())

        threading.Thread(target=read, name="ask-elicitation", daemon=True).start()
        text = await line
        return text.rstrip("\n") if text else None


def _interactive(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _prompt(field: ElicitField) -> str:
    parts = [f"  {_one_line(field.label)}"]
    if field.description:
        parts.append(f" ({_one_line(field.description)})")
    if field.kind == "enum":
        parts.append(" — one of: " + ", ".join(option.value for option in field.options))
    elif field.kind == "multi_enum":
        parts.append(" — any of, comma-separated: " + ", ".join(option.value for option in field.options))
    elif field.kind == "boolean":
        parts.append(" [yes/no]")
    if field.default is not None:
        parts.append(f" [default {_default_text(field)}]")
    elif field.required:
        parts.append(" (required)")
    return "".join(parts) + ": "


def _default_text(field: ElicitField) -> str:
    if field.kind == "boolean":
        return "yes" if field.default else "no"
    if field.kind == "multi_enum":
        return ", ".join(field.default)
    return str(field.default)


def _one_line(text: str) -> str:
    """Server-provided text on one line, without control characters that could rewrite the terminal."""
    return "".join(char if char.isprintable() else " " for char in " ".join(text.split()))
