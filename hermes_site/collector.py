"""Python's garbage collector around a Hermes process's start-up.

Starting allocates some 300,000 objects that live as long as the process (modules, settings, the
app registry, URL patterns, templates) and next to no garbage. The collector would still walk the
growing heap over and over while it is built (0.4 s of `manage.py ask`'s 3.2 s of CPU), and
afterwards every full collection walks it again: in a server run with 200 turns at once, the
collector's CPU went from 3.3 s to 2.1 s with the start-up heap frozen (README, Performance).

So a process starts with the collector off (`startup_begin`), and once it is set up
(`startup_end`) the objects it holds are moved out of the collector's sight with `gc.freeze()`
(they are never freed anyway) and collection resumes for what comes after.
"""

from __future__ import annotations

import gc


def startup_begin() -> None:
    """No collections until `startup_end`: first thing in an entry point."""
    gc.disable()


def startup_end() -> None:
    """What the process holds now is kept out of every later collection; collection resumes."""
    gc.freeze()
    gc.enable()
