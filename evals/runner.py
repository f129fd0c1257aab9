"""Running eval cases: each case, on each model, `repeat` times, on the real turn engine.

Every attempt gets a world of its own: a fresh `python -m oikos_sim` subprocess started with the
case's scenarios (and, per the contract with oikos_sim, `--replay FILE` for a recorded world and
`--pending-approval JSON` for each approval already parked), on a port of its own and with a token
made for it, and a tool hub pointed at just that server. Nothing global changes (no setting, no
shared hub), and one attempt cannot see what another did to its world.

The turn is an ordinary turn (`agent.live.turn_start_unfollowed`, as `manage.py ask` starts one):
- `ask`: one turn; `conversation`: its questions in order in one session, the last one judged
  (tokens, tool calls and seconds are those of the whole conversation);
- `signal`: the brief the watcher writes for an investigation (`watch.investigate.investigation_brief`)
  of an event built from the case, with origin `signal` — read-only, as investigations are.
Eval turns are asked by `eval:<run id>`; an `ask` or `conversation` has origin `eval`, which is
offered what an operator is (agent/tools/provenance.py), so a forbidden tool is a real choice the
model made. A confirmation Hermes asks before an execution (agent/engine/actions.py) is accepted:
the case, not a person, decides whether that call was right, and it runs against a throwaway sim.
The models are the run's own list (`models_allowed`), not `HERMES_MODELS`.

Built-in tools (`changes_since`, `a2a_send`, `remember`, `notes_search`) are not offered, and no
operators' notes are recalled into the request: they read or reach beyond the case's world
(Hermes's own history and notes, real peers), which would make a result depend on the database.

Then the deterministic checks (evals/checks.py), the judge (evals/judge.py), and one `EvalResult`
row per attempt. A Ctrl-C stops the running turn, keeps the results so far, and the run is marked
`interrupted` by the caller.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import secrets
import select
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from django.conf import settings
from django.utils import timezone

from agent.elicitation.types import ElicitationAnswer, ElicitationRecord
from agent.engine.budgets import Budgets
from agent.engine.runner import TurnHandle, TurnRejected
from agent.live import turn_start_unfollowed
from agent.models import Activity, Message, Turn
from agent.prices import turn_cost
from agent.tools.config import ServerConfig, oikos_server_name
from agent.tools.hub import ToolHub
from agent.tools.policy import ToolPolicy
from agent.version import hermes_version
from common.db import db_call
from evals import checks
from evals.cases import Case
from evals.judge import JudgeFailed, judge_items, judge_run
from evals.models import EvalResult, EvalRun
from watch.config import WatchConfig
from watch.investigate import investigation_brief
from watch.models import Investigation

REPO_ROOT = Path(__file__).resolve().parent.parent
SIM_READY_PREFIX = "oikos_sim listening on "
SIM_START_SECONDS = 30.0
SIM_STOP_SECONDS = 5.0
# How fast the sim's executions finish: an eval waits for Oikos's word, not for a real deploy.
SIM_EXECUTION_SECONDS = 0.5
SIGNAL_ORIGIN = "signal"
EVAL_ORIGIN = "eval"
# A turn may run at most this many times the case's time budget before the engine cuts it off.
TIMEOUT_FACTOR = 2.0


class SimFailed(Exception):
    """The case's oikos_sim did not start (a bad scenario name, a flag this oikos_sim lacks)."""


# --- the world ----------------------------------------------------------------------------------


def sim_command(case: Case, *, replay_path: Path | None = None) -> list[str]:
    """The oikos_sim command line for the case's world (flags: see the contract in evals/cases.py's world)."""
    command = [
        sys.executable,
        "-m",
        "oikos_sim",
        "--host",
        "127.0.0.1",
        "--port",
        "0",
        "--execution-seconds",
        f"{SIM_EXECUTION_SECONDS:g}",
    ]
    for name in case.world.scenarios:
        command += ["--scenario", name]
    if replay_path is not None:
        command += ["--replay", str(replay_path)]
    for approval in case.world.pending_approvals:
        command += ["--pending-approval", json.dumps(approval, sort_keys=True)]
    return command


@dataclass
class Sim:
    """One running oikos_sim: its base URL and the agent token it accepts."""

    url: str
    token: str
    process: subprocess.Popen[str]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(SIM_STOP_SECONDS)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()


@contextlib.contextmanager
def sim_running(case: Case) -> Iterator[Sim]:
    """A fresh oikos_sim for the case, stopped (and its replay file removed) on the way out."""
    with tempfile.TemporaryDirectory(prefix="hermes-eval-") as directory:
        replay = None
        if case.world.recorded:
            replay = Path(directory) / "recorded.json"
            replay.write_text(json.dumps([call.model_dump(mode="json") for call in case.world.recorded]))
        token = secrets.token_urlsafe(24)
        environ = {key: value for key, value in os.environ.items() if not key.startswith("OIKOS_SIM_")}
        environ["OIKOS_SIM_TOKENS"] = f"agent:hermes={token}"
        # Its log goes to a file: a pipe nobody reads would fill up and stall the sim mid-case.
        log = Path(directory) / "oikos_sim.log"
        with log.open("w") as log_file:
            process = subprocess.Popen(
                sim_command(case, replay_path=replay),
                cwd=REPO_ROOT,
                env=environ,
                stdout=subprocess.PIPE,
                stderr=log_file,
                text=True,
            )
        sim = Sim(url="", token=token, process=process)
        try:
            sim.url = _sim_ready(process, log)
            yield sim
        finally:
            sim.stop()


def _sim_ready(process: subprocess.Popen[str], log: Path) -> str:
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], SIM_START_SECONDS)
    if not ready:
        process.kill()
        raise SimFailed(f"oikos_sim did not start within {SIM_START_SECONDS:g} s")
    line = process.stdout.readline().strip()
    if not line.startswith(SIM_READY_PREFIX):
        process.kill()
        process.wait()
        said = log.read_text(errors="replace").strip().splitlines()
        raise SimFailed(f"oikos_sim did not start: {(said[-1] if said else line) or 'no output'}")
    return line.removeprefix(SIM_READY_PREFIX)


def sim_hub(sim: Sim) -> ToolHub:
    """A hub with one server, the sim, as Oikos; the rest of Hermes's configuration is not consulted."""
    config = ServerConfig(
        name=oikos_server_name(),
        transport="http",
        timeout=float(settings.HERMES_MCP_TIMEOUT),
        url=f"{sim.url}/mcp",
        headers={"Authorization": f"Bearer {sim.token}"},
        policy=ToolPolicy(oikos=True, deny=tuple(settings.HERMES_MCP_TOOLS_DENY)),
    )
    return ToolHub([config])


# --- one attempt --------------------------------------------------------------------------------


async def _confirm_everything(record: ElicitationRecord) -> ElicitationAnswer:
    """Eval turns' answers to elicitations: Hermes's confirmation before an execution is given (the
    case judges the call), any question a server asks is declined (a sim never asks one)."""
    if record.ask.purpose == "confirmation":
        return ElicitationAnswer(action="accept", content={}, answered_by="eval")
    return ElicitationAnswer(action="decline", reason="An eval run answers no server's questions.", answered_by="eval")


def signal_brief(case: Case) -> str:
    """The investigation brief the watcher would write for the case's signal."""
    assert case.signal is not None
    signal = case.signal
    event = {
        "type": signal.type,
        "id": f"eval-{case.id}",
        "at": timezone.now().isoformat(timespec="seconds"),
        "data": {"slug": signal.entity, "kind": signal.kind, "severity": signal.severity, "summary": signal.summary},
    }
    investigation = Investigation(
        entity=signal.entity,
        kind=signal.kind,
        severity=signal.severity,
        title=signal.summary or f"{signal.kind} on {signal.entity}",
        event=event,
    )
    return investigation_brief(investigation)


@dataclass
class Attempt:
    """What running one case once on one model produced, before it is stored."""

    case: Case
    model: str
    attempt: int
    session_id: uuid.UUID | None = None
    turn_ids: list[uuid.UUID] = dataclasses.field(default_factory=list)
    questions: list[str] = dataclasses.field(default_factory=list)
    seconds: float = 0.0
    error: str = ""


async def attempt_turns(case: Case, *, model: str, actor: str, hub: ToolHub, attempt: Attempt) -> None:
    """Ask the case's question(s) on the turn engine and wait for each turn to end."""
    budgets = Budgets.from_settings()
    budgets = dataclasses.replace(
        budgets, timeout=min(budgets.timeout, max(case.budgets.seconds * TIMEOUT_FACTOR, 30.0))
    )
    if case.signal is not None:
        turns = [(signal_brief(case), SIGNAL_ORIGIN)]
    else:
        turns = [(question, EVAL_ORIGIN) for question in case.questions]
    started = time.monotonic()
    try:
        for text, origin in turns:
            attempt.questions.append(text)
            handle: TurnHandle | None = None
            try:
                handle = await turn_start_unfollowed(
                    text=text,
                    actor=actor,
                    origin=origin,
                    session_id=attempt.session_id,
                    hub=hub,
                    budgets=budgets,
                    model=model,
                    models_allowed=(model,),
                    recall=False,
                    answerer=_confirm_everything if origin == EVAL_ORIGIN else None,
                    may_propose=WatchConfig.from_settings().may_propose if origin == SIGNAL_ORIGIN else False,
                )
            except TurnRejected as rejected:
                attempt.error = f"the turn was refused ({rejected.code}): {rejected.message}"
                return
            attempt.session_id = handle.session_id
            attempt.turn_ids.append(handle.turn_id)
            try:
                await handle.wait()
            except asyncio.CancelledError:
                # Ctrl-C: stop the turn as an operator's Stop would; what it said so far is kept.
                handle.cancel("The eval run was interrupted.")
                with contextlib.suppress(BaseException):
                    await asyncio.shield(handle.wait())
                raise
    finally:
        attempt.seconds = time.monotonic() - started


@dataclass
class TurnsRead:
    answer: str
    calls: list[checks.LedgerCall]
    tokens: int
    cost: Decimal | None
    statuses: list[str]
    errors: list[str]


def turns_read(turn_ids: list[uuid.UUID]) -> TurnsRead:
    """The judged (last) turn's answer, and the ledger, tokens and cost of all the case's turns."""
    turns = {turn.id: turn for turn in Turn.objects.filter(id__in=turn_ids)}
    ordered = [turns[turn_id] for turn_id in turn_ids if turn_id in turns]
    answer = ""
    if turn_ids:
        texts = [
            str(block.get("text") or "").strip()
            for message in Message.objects.filter(turn_id=turn_ids[-1], role=Message.Role.ASSISTANT).order_by("id")
            for block in message.content
            if isinstance(block, dict) and block.get("type") == "text"
        ]
        answer = "\n\n".join(text for text in texts if text)
    calls = [
        checks.LedgerCall(tool=row.tool, arguments=row.arguments or {}, result=row.result, is_error=row.is_error)
        for row in Activity.objects.filter(correlation_id__in=turn_ids).order_by("started_at", "id")
    ]
    costs = [turn.cost_usd for turn in ordered]
    cost = None if not costs or any(c is None for c in costs) else sum((c for c in costs if c is not None), Decimal(0))
    if cost is None and ordered:
        # Turns store no cost for a model without a known price; try the price table once more.
        priced = [turn_cost(model=turn.model, usage=turn.usage or {}) for turn in ordered]
        cost = None if any(p is None for p in priced) else sum((p for p in priced if p is not None), Decimal(0))
    return TurnsRead(
        answer=answer,
        calls=calls,
        tokens=sum(turn.tokens_total for turn in ordered),
        cost=cost,
        statuses=[turn.status for turn in ordered],
        errors=[turn.error for turn in ordered if turn.error],
    )


def _judged_question(questions: list[str]) -> str:
    """The judged question; for a conversation, the earlier ones first, so the judge has the context."""
    if len(questions) < 2:
        return questions[-1] if questions else ""
    earlier = "\n".join(f"- {question}" for question in questions[:-1])
    return f"(Earlier in this session the operator asked:\n{earlier})\n\n{questions[-1]}"


def _score(report: checks.CheckReport, judged: list[dict[str, Any]]) -> float:
    if report.hard_fail:
        return 0.0
    if not judged:
        return 1.0 if not report.failures else 0.0
    return sum(1 for item in judged if item["ok"]) / len(judged)


async def attempt_result(run: EvalRun, attempt: Attempt, *, judge_model: str) -> EvalResult:
    """Check and judge one attempt, and store its result."""
    case = attempt.case
    read = await db_call(turns_read, turn_ids=attempt.turn_ids)
    report = checks.checks_run(
        case,
        checks.Observed(
            answer=read.answer,
            questions=attempt.questions,
            calls=read.calls,
            tokens=read.tokens,
            seconds=attempt.seconds,
        ),
    )
    error = attempt.error
    failed_turns = [status for status in read.statuses if status != Turn.Status.DONE]
    if failed_turns and not error:
        error = f"turn ended {', '.join(failed_turns)}: {'; '.join(read.errors) or 'no error recorded'}"
    if error:
        report.failures.append(checks.ERROR)
    judged: list[dict[str, Any]] = []
    judge_tokens = 0
    items = judge_items(case.expect.facts, case.expect.forbidden_claims)
    if items and read.answer:
        evidence = [
            (f"{call.tool}({json.dumps(call.arguments, sort_keys=True)[:300]})", checks.result_text(call.result))
            for call in read.calls
        ]
        try:
            verdict = await judge_run(
                model=judge_model,
                question=_judged_question(attempt.questions),
                answer=read.answer,
                evidence=evidence,
                items=items,
            )
            judged, judge_tokens = verdict.judged, verdict.tokens
        except JudgeFailed as failure:
            report.failures.append(checks.JUDGE_ERROR)
            error = f"{error}; {failure}" if error else str(failure)
    elif items:
        # Nothing was said: no fact is stated, and no forbidden claim made.
        judged = [
            {"kind": item.kind, "text": item.text, "ok": item.kind == "forbidden", "reason": "there is no answer"}
            for item in items
        ]
    for entry in judged:
        code = checks.MISSING_FACT if entry["kind"] == "fact" else checks.FORBIDDEN_CLAIM
        if not entry["ok"] and code not in report.failures:
            report.failures.append(code)
    score = 0.0 if checks.JUDGE_ERROR in report.failures else _score(report, judged)
    gates = [code for code in report.failures if code not in (checks.MISSING_FACT, checks.FORBIDDEN_CLAIM)]
    passed = not gates and score >= case.bar
    result = EvalResult(
        run=run,
        case_id=case.id,
        case_digest=case.digest,
        case_tags=list(case.tags),
        model=attempt.model,
        attempt=attempt.attempt,
        session_id=attempt.session_id,
        turn_id=attempt.turn_ids[-1] if attempt.turn_ids else None,
        passed=passed,
        score=round(score, 4),
        checks=report.checks,
        judged=judged,
        failures=report.failures,
        answer=read.answer,
        error=error,
        tokens=read.tokens,
        judge_tokens=judge_tokens,
        cost_usd=read.cost,
        tool_calls=len(read.calls),
        latency_ms=int(attempt.seconds * 1000),
    )
    await db_call(result.save)
    return result


# --- a run ----------------------------------------------------------------------------------


def run_create(
    *, models: list[str], judge_model: str, tags: list[str], case_ids: list[str], repeat: int, label: str, by: str
) -> EvalRun:
    return EvalRun.objects.create(
        model_names=models,
        judge_model=judge_model,
        tags=tags,
        case_ids=case_ids,
        repeat=repeat,
        label=label,
        by=by,
        version=hermes_version(),
    )


def run_finish(run: EvalRun, *, interrupted: bool) -> None:
    run.status = EvalRun.Status.INTERRUPTED if interrupted else EvalRun.Status.DONE
    run.finished_at = timezone.now()
    run.save(update_fields=["status", "finished_at"])


def run_actor(run: EvalRun) -> str:
    return f"eval:{str(run.id)[:8]}"


async def run_cases(
    run: EvalRun,
    cases: list[Case],
    *,
    models: list[str],
    repeat: int,
    judge_model: str,
    progress: Callable[[EvalResult], None] = lambda _result: None,
) -> list[EvalResult]:
    """Every case x model x attempt, in that order; each result is stored and shown as it comes."""
    results: list[EvalResult] = []
    for case in cases:
        for model in models:
            for number in range(1, repeat + 1):
                result = await attempt_run(run, case, model=model, number=number, judge_model=judge_model)
                results.append(result)
                progress(result)
    return results


async def attempt_run(run: EvalRun, case: Case, *, model: str, number: int, judge_model: str) -> EvalResult:
    """One attempt in a world of its own: sim up, turns, sim down, then checks and judge."""
    attempt = Attempt(case=case, model=model, attempt=number)
    try:
        with sim_running(case) as sim:
            hub = sim_hub(sim)
            try:
                await attempt_turns(case, model=model, actor=run_actor(run), hub=hub, attempt=attempt)
            finally:
                await hub.aclose()
    except SimFailed as failure:
        attempt.error = str(failure)
    return await attempt_result(run, attempt, judge_model=judge_model)
