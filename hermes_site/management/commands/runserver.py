"""`manage.py runserver`: Daphne's, serving HTTP and websockets from one ASGI process.

Daphne's app would provide it, but importing that app installs Twisted's reactor in every process
that sets Django up; this command imports Daphne only when it runs.
"""

from __future__ import annotations

from daphne.management.commands.runserver import Command as DaphneRunserverCommand


class Command(DaphneRunserverCommand):
    pass
