"""Domain errors. Their messages are written for whoever reads them next: an operator or a model."""

from __future__ import annotations


class SimError(Exception):
    """A request the simulated Oikos refuses, with a message that says how to fix it."""


class UnknownEntity(SimError):
    pass


class InvalidRequest(SimError):
    pass


class NotFound(SimError):
    pass


class AlreadyDecided(SimError):
    """A decision arrived for an approval someone already decided."""

    def __init__(self, approval_id: str, status: str, decided_by: str | None) -> None:
        super().__init__(f"Approval {approval_id} was already {status} by {decided_by}.")
        self.approval_id = approval_id
        self.status = status
        self.decided_by = decided_by


class Forbidden(SimError):
    pass
