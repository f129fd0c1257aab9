"""`manage.py doctor`: what works and what doesn't, one row per part Hermes depends on.

`doctor_run()` returns the rows; the management command prints them as a table.
"""

from __future__ import annotations

from agent.doctor.checks import CheckResult, Status, doctor_run

__all__ = ["CheckResult", "Status", "doctor_run"]
