#!/usr/bin/env python
"""Django's command-line utility for Hermes."""

import os
import sys

from common.dotenv import DotenvError, dotenv_load
from hermes_site.collector import startup_begin, startup_end


def main() -> None:
    startup_begin()
    # `.env` (written by `make run`, or the operator's own) fills in what the environment lacks.
    try:
        dotenv_load()
    except DotenvError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hermes_site.settings")
    from django.core.management import ManagementUtility
    from django.core.management.base import BaseCommand

    class Utility(ManagementUtility):
        # Django is set up and the command's module loaded: the start-up is over.
        def fetch_command(self, subcommand: str) -> BaseCommand:
            command = super().fetch_command(subcommand)
            startup_end()
            return command

    Utility(sys.argv).execute()


if __name__ == "__main__":
    main()
