"""`manage.py ask "question"`: one turn from the terminal.

The answer streams to stdout and each tool call gets one line on stderr, so `ask ... > answer.md`
keeps just the answer. `--json` prints the event stream as JSON lines instead, for scripts (the
model's `thinking` events included; the plain answer leaves thinking out). `--model` switches the
session to another model of `HERMES_MODELS` from this question on. When an MCP server asks for
input mid-call (elicitation), `ask` prompts on the terminal; `--no-input` (or no terminal) declines.

A question that would run with no tool at all (no MCP server configured, or none reachable and
none of their tools known) is refused with the reason, exit 2: an answer without Oikos's tools
would be a guess. Logs stay at WARNING unless `-v 2` or `HERMES_LOG_LEVEL` asks for more, so the
terminal shows the answer and the tool lines.
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import sys
import uuid
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser, OutputWrapper

from agent import presence
from agent.conversation.events import Approval, Done, ElicitationEvent, Error, Event, TextDelta, ToolResult, ToolUse
from agent.elicitation.terminal import TerminalAnswerer
from agent.engine.runner import TurnRejected
from agent.live import turn_start_unfollowed
from agent.memory.tool import REMEMBER
from agent.tools.config import MCPConfigError
from agent.tools.hub import ToolHub, tool_hub
from agent.tools.local import LOCAL_SERVER
from common.dotenv import dotenv_state
from common.logs import console_quiet

EXIT_ERROR = 1
EXIT_REJECTED = 2
EXIT_INTERRUPTED = 130
# Killed politely (SIGTERM: `timeout`, systemd, a container stop): the turn ended `interrupted`.
EXIT_TERMINATED = 143


class Command(BaseCommand):
    help = "Ask Hermes a question; the answer streams to stdout, tool calls to stderr."
    # The system checks import every URL conf, view and template tag the server has, to
    # check serving: exposure, deploy settings, admin. A one-shot question serves nothing; `manage.py
    # check` and the deploy checks still run them.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("question", help="what to ask, in plain language")
        parser.add_argument("--session", help="continue this session (its id is printed after every answer)")
        parser.add_argument("--json", action="store_true", help="print the event stream as JSON lines")
        parser.add_argument("--actor", default="operator:cli", help="who is asking (recorded in the ledger)")
        parser.add_argument(
            "--model", help="switch the session to this model (one of HERMES_MODELS) from this question on"
        )
        parser.add_argument(
            "--no-input",
            action="store_true",
            help="decline every question an MCP server asks during the turn (also without a terminal)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["verbosity"] < 2 and not settings.HERMES_LOG_LEVEL_CHOSEN:
            # The terminal is the answer's: stderr carries the tool lines, and warnings and errors.
            console_quiet(logging.WARNING)
        session_id = _session_id_parse(options["session"])
        printer = JsonPrinter(self.stdout) if options["json"] else TextPrinter(self.stdout, self.stderr)
        # Announced before asking: this process owns its turn, and a turn left by an `ask` that
        # died is freed by the next one at once.
        presence.presence_start("ask")
        try:
            answerer = TerminalAnswerer(no_input=options["no_input"])
            answerer.operator = options["actor"]
            code = asyncio.run(
                _ask(
                    options["question"],
                    session_id,
                    options["actor"],
                    printer,
                    model=options["model"],
                    answerer=answerer,
                    warn=printer.warning,
                )
            )
        except KeyboardInterrupt:
            code = EXIT_INTERRUPTED
        finally:
            presence.presence_stop()
        if code:
            sys.exit(code)


def _session_id_parse(raw: str | None) -> uuid.UUID | None:
    if raw is None:
        return None
    try:
        return uuid.UUID(raw)
    except ValueError:
        raise CommandError(f"--session must be a session id (a UUID), not {raw!r}", returncode=EXIT_REJECTED) from None


async def _ask(
    question: str,
    session_id: uuid.UUID | None,
    actor: str,
    printer: Printer,
    *,
    model: str | None = None,
    answerer: TerminalAnswerer | None = None,
    warn: Callable[[str], None] | None = None,
) -> int:
    try:
        hub = tool_hub()
    except MCPConfigError as exc:
        raise CommandError(str(exc), returncode=EXIT_REJECTED) from None
    try:
        await _tools_check(hub, warn or (lambda _message: None), session_id=session_id)
        try:
            handle = await turn_start_unfollowed(
                text=question,
                actor=actor,
                origin="cli",
                session_id=session_id,
                hub=hub,
                model=model,
                answerer=answerer,
            )
        except TurnRejected as rejected:
            printer.rejected(rejected)
            return EXIT_REJECTED
        failed = terminated = False

        def terminate() -> None:
            nonlocal terminated
            terminated = True
            handle.interrupt("The `ask` command was stopped (SIGTERM) while answering.")

        # SIGTERM ends the turn cleanly: what it said is kept, it is marked `interrupted`, and the
        # session takes the next question at once.
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, terminate)
        try:
            async for event in handle.events():
                printer.event(event)
                failed = failed or isinstance(event, Error)
        except asyncio.CancelledError:
            # Ctrl-C: stop the turn the way an operator's Stop button does, and keep what it said.
            handle.cancel()
            await handle.wait()
            raise KeyboardInterrupt from None
        finally:
            asyncio.get_running_loop().remove_signal_handler(signal.SIGTERM)
        if terminated:
            return EXIT_TERMINATED
        return EXIT_ERROR if failed else 0
    finally:
        await hub.aclose()


async def _tools_check(hub: ToolHub, warn: Callable[[str], None], *, session_id: uuid.UUID | None) -> None:
    """Refuse a question that would run with no tool at all: no MCP server (nor built-in tool)
    configured, or none reachable and none of their tools known. Servers down whose tools are known
    (as they last listed them) are a warning: the turn runs, and the model is told they are down.

    A continued session with nothing reachable is the engine's to decide: it refuses one whose
    history has tool calls (`tools_unavailable`, agent/engine/runner.py).
    """
    state = dotenv_state()
    where = f" ({state.describe()})" if state is not None else ""
    offered = await hub.list_tools()
    if not offered and not hub.servers:
        raise CommandError(
            "no MCP server is configured, so Hermes would answer without tools: set OIKOS_MCP_URL and "
            "OIKOS_MCP_TOKEN (or HERMES_MCP_CONFIG), or start `make run`, which writes them to `.env` for "
            f"commands in other terminals{where}",
            returncode=EXIT_REJECTED,
        )
    down = hub.unreachable()
    if not offered and session_id is None:
        reasons = "; ".join(f"{server.name}: {server.error}" for server in down) or "they offer none"
        raise CommandError(
            f"no MCP server is reachable, so Hermes would answer without tools ({reasons}){where}",
            returncode=EXIT_REJECTED,
        )
    for server in down:
        known = "its tools are offered as it last listed them" if server.tools_known else "its tools are left out"
        warn(f"[warning] MCP server {server.name} is unreachable ({server.error}); {known}")


class Printer:
    def warning(self, text: str) -> None:
        sys.stderr.write(text + "\n")
        sys.stderr.flush()

    def event(self, event: Event) -> None:
        raise NotImplementedError

    def rejected(self, rejected: TurnRejected) -> None:
        raise NotImplementedError


class JsonPrinter(Printer):
    def __init__(self, out: OutputWrapper) -> None:
        self.out = out

    def event(self, event: Event) -> None:
        self.out.write(json.dumps(event.to_dict(), ensure_ascii=False) + "\n")
        self.out.flush()

    def rejected(self, rejected: TurnRejected) -> None:
        self.event(Error(code=rejected.code, message=rejected.message))


class TextPrinter(Printer):
    def __init__(self, out: OutputWrapper, err: OutputWrapper) -> None:
        self.out = out
        self.err = err
        self.block = -1
        self.calls: dict[str, ToolUse] = {}
        # The answer's last line is unfinished: a line on stderr (the same terminal) ends it first.
        self.mid_line = False

    def _write(self, stream: OutputWrapper, text: str) -> None:
        if stream is self.err and self.mid_line:
            self._write(self.out, "\n")
        # Django's OutputWrapper adds a newline unless told otherwise.
        stream.write(text, ending="")
        stream.flush()
        if stream is self.out and text:
            self.mid_line = not text.endswith("\n")

    def warning(self, text: str) -> None:
        self._write(self.err, text + "\n")

    def event(self, event: Event) -> None:
        if isinstance(event, TextDelta):
            if event.block != self.block:
                if self.block >= 0:
                    # One blank line between blocks, however the last one ended.
                    self._write(self.out, "\n\n" if self.mid_line else "\n")
                self.block = event.block
            self._write(self.out, event.text)
        elif isinstance(event, ToolUse):
            self.calls[event.id] = event
        elif isinstance(event, ToolResult):
            call = self.calls.get(event.tool_use_id)
            where = f"{call.server}.{call.tool}" if call and call.server else event.name
            arguments = json.dumps(call.input, ensure_ascii=False) if call else "{}"
            if len(arguments) > 120:
                arguments = arguments[:117] + "..."
            if event.state == "unknown":
                outcome = "outcome unknown (it may have run): " + _first_line(event.content)
            else:
                outcome = "error: " + _first_line(event.content) if event.is_error else "ok"
            self._write(self.err, f"[tool] {where} {arguments} -> {outcome} ({event.duration_ms} ms)\n")
            proposal = _note_proposed(call, event)
            if proposal is not None:
                self._write(
                    self.err,
                    f"[note] proposed, not saved: note proposal {proposal} waits for an operator's Save in the "
                    "control room (the rail of /ui/, or the Notes page /ui/notes/)\n",
                )
        elif isinstance(event, Approval):
            self._write(
                self.err,
                f"[approval] {event.action} {event.target} ({event.risk_class}) is waiting for an operator: "
                f"approval {event.approval_id}, execution {event.execution_id}\n",
            )
        elif isinstance(event, ElicitationEvent) and event.status != "pending":
            how = {"accept": "accepted", "decline": "declined", "cancel": "cancelled"}.get(event.status, event.status)
            why = f": {event.reason}" if event.reason else ""
            self._write(self.err, f"[question] {event.server} asked for input; {how}{why}\n")
        elif isinstance(event, Error):
            self._write(self.err, f"error ({event.code}): {event.message}\n")
        elif isinstance(event, Done):
            if self.mid_line:
                self._write(self.out, "\n")
            usage = event.usage
            self._write(
                self.err,
                f"[done] {event.stop_reason} after {event.iterations} call(s) to {event.model or 'the model'}; "
                f"tokens in "
                f"{usage.get('input_tokens', 0)}, out {usage.get('output_tokens', 0)}, cache read "
                f"{usage.get('cache_read_input_tokens', 0)}, cache write "
                f"{usage.get('cache_creation_input_tokens', 0)}"
                f"{'' if event.cost_usd is None else f'; cost ${event.cost_usd} (list price)'}\n"
                f"session {event.session_id} (continue with --session {event.session_id})\n",
            )

    def rejected(self, rejected: TurnRejected) -> None:
        self._write(self.err, f"{rejected.message}\n")


def _note_proposed(call: ToolUse | None, result: ToolResult) -> int | None:
    """The proposal a successful `remember` call made (agent/memory/tool.py), if this was one."""
    if call is None or call.server != LOCAL_SERVER or call.tool != REMEMBER or result.is_error:
        return None
    try:
        answer = json.loads(result.content)
    except ValueError:
        return None
    proposal = answer.get("proposal_id") if isinstance(answer, dict) else None
    return proposal if isinstance(proposal, int) else None


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line[:200]
