"""`manage.py eval`: run eval cases on one or more models, judge them, print the tables.

    manage.py eval --model claude-sonnet-5 --model claude-haiku-4-5 --repeat 3 --judge-model claude-opus-5
    manage.py eval --tag safety --model claude-sonnet-5        # only the cases tagged `safety`
    manage.py eval --list                                      # the cases and their tags
    manage.py eval --check                                     # validate every case file

One line per result as it comes (case, model, attempt, PASS/FAIL, score, why, tokens, seconds),
then the tables per model and per tag (evals/report.py). Exit status: 0 when every result passed,
1 when one failed (below its case's bar, a gate, an error), 2 for bad arguments or case files,
130 after Ctrl-C (the run is kept, marked `interrupted`). docs/evals.md explains how to read it.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from agent import presence
from common.logs import console_quiet
from evals.cases import CASES_DIR, Case, CaseInvalid, case_load, cases_load
from evals.models import EvalResult
from evals.report import report_text
from evals.runner import run_cases, run_create, run_finish
from oikos_sim.scenarios import SCENARIOS

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


class Command(BaseCommand):
    help = "Run eval cases (evals/cases/) on models and judge the answers."
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--model", action="append", default=[], help="a model to evaluate (repeatable)")
        parser.add_argument("--tag", action="append", default=[], help="only cases with this tag (repeatable: any)")
        parser.add_argument("--case", action="append", default=[], help="only this case id (repeatable)")
        parser.add_argument("--repeat", type=int, default=1, help="attempts per case and model (default 1)")
        parser.add_argument("--judge-model", help="the model that judges answers (default: HERMES_MODEL)")
        parser.add_argument("--label", default="", help="a label to compare runs by, e.g. 'prompt v2'")
        parser.add_argument("--by", default="operator:cli", help="who runs it (stored on the run)")
        parser.add_argument("--cases-dir", default=str(CASES_DIR), help="where the case files are")
        parser.add_argument("--list", action="store_true", help="list the cases and their tags, then exit")
        parser.add_argument("--check", action="store_true", help="validate every case file, then exit")

    def handle(self, *args: Any, **options: Any) -> None:
        directory = Path(options["cases_dir"])
        if options["check"]:
            sys.exit(self._check(directory))
        try:
            cases = cases_load(directory, ids=options["case"] or None, tags=options["tag"] or None)
        except CaseInvalid as exc:
            raise CommandError(str(exc), returncode=EXIT_USAGE) from None
        problems = [problem for case in cases for problem in world_problems(case)]
        if problems:
            raise CommandError("; ".join(problems), returncode=EXIT_USAGE)
        if options["list"]:
            for case in cases:
                kind = "signal" if case.signal else "conversation" if case.conversation else "ask"
                self.stdout.write(f"{case.id}  [{', '.join(case.tags)}]  {kind}: {case.title}")
            return
        models = list(dict.fromkeys(options["model"]))
        if not models:
            raise CommandError("name at least one --model to evaluate", returncode=EXIT_USAGE)
        if options["repeat"] < 1:
            raise CommandError("--repeat must be 1 or more", returncode=EXIT_USAGE)
        if not cases:
            raise CommandError("no case matches --tag/--case", returncode=EXIT_USAGE)
        judge_model = options["judge_model"] or settings.HERMES_MODEL
        if options["verbosity"] < 2 and not settings.HERMES_LOG_LEVEL_CHOSEN:
            console_quiet(logging.WARNING)
        run = run_create(
            models=models,
            judge_model=judge_model,
            tags=options["tag"],
            case_ids=options["case"],
            repeat=options["repeat"],
            label=options["label"],
            by=options["by"],
        )
        attempts = len(cases) * len(models) * options["repeat"]
        self.stdout.write(
            f"eval run {run.id}: {len(cases)} case(s) x {len(models)} model(s) x {options['repeat']} = {attempts}"
            f" attempt(s), judged by {judge_model}"
        )
        results: list[EvalResult] = []

        def progress(result: EvalResult) -> None:
            results.append(result)
            self.stdout.write(result_line(result))
            self.stdout.flush()

        presence.presence_start("eval")
        interrupted = False
        try:
            asyncio.run(
                run_cases(
                    run, cases, models=models, repeat=options["repeat"], judge_model=judge_model, progress=progress
                )
            )
        except KeyboardInterrupt:
            interrupted = True
            self.stderr.write("Interrupted: the results so far are kept; the run is marked interrupted.")
        finally:
            run_finish(run, interrupted=interrupted)
            presence.presence_stop()
        self.stdout.write("")
        self.stdout.write(report_text(results))
        judged = sum(result.judge_tokens for result in results)
        self.stdout.write(
            f"\nrun {run.id} ({run.status}); {sum(r.passed for r in results)}/{len(results)} passed;"
            f" the judge used {judged:,} tokens"
        )
        if interrupted:
            sys.exit(EXIT_INTERRUPTED)
        if any(not result.passed for result in results):
            sys.exit(EXIT_FAILED)

    def _check(self, directory: Path) -> int:
        problems = []
        paths = sorted(directory.glob("*.yaml"))
        for path in paths:
            try:
                problems += world_problems(case_load(path))
            except CaseInvalid as exc:
                problems.append(str(exc))
        for problem in problems:
            self.stderr.write(problem)
        self.stdout.write(f"{len(paths) - len(problems)} of {len(paths)} case file(s) valid")
        return 1 if problems else 0


def world_problems(case: Case) -> list[str]:
    """What the case's world names that this oikos_sim does not have (a scenario is code, not data)."""
    unknown = [name for name in case.world.scenarios if name not in SCENARIOS]
    if not unknown:
        return []
    return [f"{case.id}.yaml: world.scenarios: unknown {', '.join(unknown)} (oikos_sim has {', '.join(SCENARIOS)})"]


def result_line(result: EvalResult) -> str:
    """One progress line: case, model, attempt, verdict and score, why, tokens, seconds."""
    verdict = "PASS" if result.passed else "FAIL"
    why = ", ".join(result.failures) or "-"
    return (
        f"{verdict} {result.score:.2f}  {result.case_id}  {result.model} #{result.attempt}  {why}  "
        f"{result.tokens:,} tokens  {result.tool_calls} calls  {result.latency_ms / 1000:.1f} s"
    )
