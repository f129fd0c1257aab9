"""`manage.py doctor`: check everything Hermes depends on and print one row per part.

Exit status 0 when nothing required is broken (warnings allowed, unless `--strict`), 1 otherwise.
Details never include a configured secret.
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from agent.doctor import CheckResult, Status, doctor_run

EXIT_BROKEN = 1


class Command(BaseCommand):
    help = "Check the database, channel layer, MCP servers, Oikos REST, the model API, the persona and security."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--timeout", type=float, default=10.0, help="seconds each remote check may take")
        parser.add_argument("--bind", help="the address Hermes listens on (default: $HERMES_BIND, else 127.0.0.1)")
        parser.add_argument("--json", action="store_true", help="print the rows as a JSON list")
        parser.add_argument("--strict", action="store_true", help="exit non-zero on warnings too")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["verbosity"] < 2:
            # The checks' own log lines repeat what the table says; errors still show.
            logging.getLogger("agent").setLevel(logging.ERROR)
        results = doctor_run(timeout=options["timeout"], bind=options["bind"])
        if options["json"]:
            self.stdout.write(json.dumps([result.to_dict() for result in results], indent=2))
        else:
            self.stdout.write(table_render(results))
            self.stdout.write(summary(results))
        failing = {Status.FAIL, Status.WARN} if options["strict"] else {Status.FAIL}
        if any(result.status in failing for result in results):
            sys.exit(EXIT_BROKEN)


def table_render(results: list[CheckResult]) -> str:
    rows = [("CHECK", "STATUS", "TIME", "DETAIL")]
    rows += [
        (
            result.name,
            result.status.upper(),
            f"{result.latency_ms} ms" if result.latency_ms is not None else "",
            result.detail,
        )
        for result in results
    ]
    widths = [max(len(row[column]) for row in rows) for column in range(3)]
    lines = [
        f"{name:<{widths[0]}}  {status:<{widths[1]}}  {time:>{widths[2]}}  {detail}".rstrip()
        for name, status, time, detail in rows
    ]
    return "\n".join(lines)


def summary(results: list[CheckResult]) -> str:
    broken = [result.name for result in results if result.status == Status.FAIL]
    warned = [result.name for result in results if result.status == Status.WARN]
    if broken:
        return f"\nBroken: {', '.join(broken)}."
    if warned:
        return f"\nNothing required is broken; warnings: {', '.join(warned)}."
    return "\nEverything checked is working."
