"""`manage.py export_session <id> [--format md|json] [-o file]`: a session as an incident note.

The same note as `GET /sessions/<id>/export.md` (or its JSON), for the shell: to stdout, or to a
file with `-o`.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.core.serializers.json import DjangoJSONEncoder

from api.export import export_read
from transcript.export_markdown import session_markdown


class Command(BaseCommand):
    help = "Export a session as a Markdown incident note (or its facts as JSON)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("session_id", help="the session's id (as shown in the control room or GET /sessions)")
        parser.add_argument("--format", choices=("md", "json"), default="md")
        parser.add_argument("-o", "--output", type=Path, help="write here instead of to stdout")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            session_id = uuid.UUID(options["session_id"])
        except ValueError:
            raise CommandError(f"{options['session_id']!r} is not a session id (a UUID).") from None
        export = export_read(session_id=session_id)
        if export is None:
            raise CommandError(f"There is no session with id {session_id}.")
        if options["format"] == "json":
            text = json.dumps(export.as_json(), cls=DjangoJSONEncoder, indent=2, ensure_ascii=False) + "\n"
        else:
            text = session_markdown(export)
        if options["output"] is None:
            self.stdout.write(text, ending="")
            return
        try:
            options["output"].write_text(text, encoding="utf-8")
        except OSError as exc:
            raise CommandError(f"Cannot write {options['output']}: {exc.strerror}.") from None
        self.stderr.write(f"Wrote {options['output']} ({len(export.turns)} turns).")
