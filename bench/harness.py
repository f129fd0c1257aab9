"""What the benchmark scripts share: Hermes's Django, set up on the configured database.

Each script is run as `python bench/<name>.py`, so this directory is on `sys.path` and they import
this module by its plain name.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def django_setup() -> str:
    """Set Django up and migrate: `DATABASE_URL`, else a fresh SQLite file. Returns the engine's name."""
    if not os.environ.get("DATABASE_URL"):
        path = Path(tempfile.mkdtemp(prefix="hermes-bench-")) / "bench.sqlite3"
        os.environ["DATABASE_URL"] = f"sqlite:///{path}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hermes_site.settings")
    os.environ.setdefault("HERMES_LOG_LEVEL", "WARNING")
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    from django.conf import settings

    return str(settings.DATABASES["default"]["ENGINE"]).rsplit(".", 1)[-1]
