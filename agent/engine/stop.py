"""How a running turn is asked to stop: written by its `TurnHandle`, read by its loop.

A plain record rather than flags set on the loop from outside, so that the handle (which any
transport may call) and the loop (which owns the turn's task) share one small, visible contract.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent.conversation.outcomes import (
    CUTOFF_CANCELLED,
    CUTOFF_INTERRUPTED,
    OPERATOR_CANCEL_REASON,
    Cutoff,
    cutoff_cancelled,
)


@dataclass
class StopRequest:
    """Why the turn stops, once something stops it.

    `reason` is what a cancelled turn's record says (the operator's Stop unless a frontend names
    another, such as a peer that hung up); `cause` is what the model hears of the calls the stop cuts
    off; `interrupted` is set when the turn's process is going away, and the turn then ends
    `interrupted` instead of `cancelled`. `begun` says whether the loop has started: a task cancelled
    before its first step would end without running a line of the turn, so a stop that comes
    earlier is `requested_before_start` and the loop ends at its first step instead.
    """

    reason: str = OPERATOR_CANCEL_REASON
    cause: Cutoff = CUTOFF_CANCELLED
    interrupted: str = ""
    requested_before_start: bool = False
    begun: bool = False

    def cancel_request(self, reason: str | None, *, already_cancelling: bool) -> bool:
        """Record a cancel (the first one's reason stands); whether the task must be cancelled now."""
        if reason and not already_cancelling and not self.requested_before_start:
            self.reason = reason
            self.cause = cutoff_cancelled(reason)
        if self.begun:
            return True
        self.requested_before_start = True
        return False

    def interrupt_request(self, reason: str) -> None:
        """Record that the turn's process is going away: it ends `interrupted` with `reason`."""
        self.interrupted = reason
        self.cause = CUTOFF_INTERRUPTED

    def begin(self) -> bool:
        """Mark the loop started; whether a stop came before it did."""
        self.begun = True
        return self.requested_before_start
