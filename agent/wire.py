"""What a turn's engine events become on the channel layer: `Published` messages, coalesced.

Plain state, no clock and no layer: the turn registry's pump (`agent.live`) feeds a `Coalescer`
the turn's events and publishes what it returns, flushing held deltas when its time is up.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent.conversation.events import Event, TextDelta, TextEnd, ThinkingDelta, ThinkingEnd


@dataclass(frozen=True)
class Published:
    """One `turn.event` message's worth of a turn: the engine events numbered `first` to `through`
    (`handle.log`), as `events`. At most one of `events` is an engine event (a coalesced delta
    stands for all its deltas); the wire events ride before it. `TurnStart` alone is number 0."""

    first: int
    through: int
    events: tuple[Event, ...]


class Coalescer:
    """What the pump publishes of a turn's engine events, as plain state (no clock, no layer).

    Text and thinking deltas are held and published merged (`flush`, when the pump's
    `COALESCE_SECONDS` are up); a block's end adds `TextEnd`/`ThinkingEnd` with its full text, which
    rides on the next message so that every message carries engine events and the numbering has
    no holes. Any other event goes out at once, with what waited before it.
    """

    def __init__(self) -> None:
        # Engine events read so far, and the last of them published.
        self.consumed = 0
        self.published = 0
        # The block being streamed: (`text` or `thinking`, its number), and whether it is redacted.
        self._block: tuple[str, int] | None = None
        self._redacted = False
        self._block_text = ""
        self._pending = ""
        self._pending_through = 0
        self._ends: list[Event] = []

    @property
    def holding(self) -> bool:
        """Whether deltas wait to be flushed."""
        return bool(self._pending)

    def add(self, event: Event) -> list[Published]:
        """Take the turn's next engine event; returns what to publish now."""
        self.consumed += 1
        if isinstance(event, TextDelta | ThinkingDelta):
            ended = self._block_end() if self._block not in (None, (event.type, event.block)) else []
            self._block = (event.type, event.block)
            self._redacted = self._redacted or (isinstance(event, ThinkingDelta) and event.redacted)
            self._pending += event.text
            self._block_text += event.text
            self._pending_through = self.consumed
            return ended
        return [*self._block_end(), self._message(event, self.consumed)]

    def flush(self) -> list[Published]:
        """The deltas held, merged into one message (nothing when none wait)."""
        if not self._pending or self._block is None:
            return []
        kind, number = self._block
        delta: Event = (
            TextDelta(text=self._pending, block=number)
            if kind == "text"
            else ThinkingDelta(text=self._pending, block=number, redacted=self._redacted)
        )
        self._pending = ""
        return [self._message(delta, self._pending_through)]

    def _block_end(self) -> list[Published]:
        flushed = self.flush()
        if self._block is not None:
            kind, number = self._block
            end: Event = (
                TextEnd(text=self._block_text, block=number)
                if kind == "text"
                else ThinkingEnd(text=self._block_text, block=number, redacted=self._redacted)
            )
            self._ends.append(end)
        self._block, self._block_text, self._redacted = None, "", False
        return flushed

    def _message(self, event: Event, through: int) -> Published:
        message = Published(first=self.published + 1, through=through, events=(*self._ends, event))
        self.published, self._ends = through, []
        return message
