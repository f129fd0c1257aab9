"""Hermes's settings plus the Oikos REST client's (`OIKOS_API_URL`, `OIKOS_API_TOKEN`) from the
environment, for processes whose settings module does not read them yet."""

from __future__ import annotations

import os

from hermes_site.settings import *  # noqa: F403

OIKOS_API_URL = os.environ.get("OIKOS_API_URL", "")
OIKOS_API_TOKEN = os.environ.get("OIKOS_API_TOKEN", "")
