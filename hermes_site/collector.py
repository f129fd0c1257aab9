"""Python's garbage collector around a Hermes process's start-up.

Starting allocates some 300,000 objects that live as long as the process (modules, settings, the
app registry, URL patterns, templates) and next to no garbage. The collector would still walk the
growing heap over and over while it is built, and afterwards every full collection walks it again.

So a process starts with the collector off (`startup_begin`), and once it is set up
(`startup_end`) the objects it holds are moved out of the collector's sight with `gc.freeze()`
(they are never freed anyway) and collection resumes for what comes after.

It resumes less often than Python's default: a young collection once 10,000 more container objects
were made than freed, not 700. A turn makes many short-lived objects (the SDKs' models of every
streamed event, requests, rows), nearly all freed by reference counting; collecting every 700 only
walked them while they lived, and pushed the rest on to the older generations, whose full
collections then walked the whole heap and paused the event loop. The price is a somewhat larger
peak memory; both figures are in docs/performance.md.
"""

from __future__ import annotations

import gc

# Allocations (of container objects, net of frees) between two collections of the young generation.
YOUNG_GENERATION_THRESHOLD = 10_000


def startup_begin() -> None:
    """No collections until `startup_end`: first thing in an entry point."""
    gc.disable()


def startup_end() -> None:
    """What the process holds now is kept out of every later collection; collection resumes, its
    young generation collected every `YOUNG_GENERATION_THRESHOLD` allocations."""
    gc.freeze()
    _young, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_GENERATION_THRESHOLD, middle, old)
    gc.enable()
