"""`manage.py search_reindex`: rebuild the search index from the stored messages and tool-call ledger.

Run it once after upgrading to a Hermes with search (sessions from before are not indexed until
then), or whenever the index is suspected to be out of step. It replaces the index whole in one
transaction; run it while no turn is running, or a call it races may be indexed twice.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand
from django.db import transaction

from agent.search.entries import search_reindex


class Command(BaseCommand):
    help = "Rebuild the search index (questions, answers, tool calls) from the stored sessions."

    def handle(self, *args: Any, **options: Any) -> None:
        with transaction.atomic():
            written = search_reindex()
        if options["verbosity"]:
            self.stdout.write(f"Indexed {written} questions, answers and tool calls.")
