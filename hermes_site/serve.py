"""`python -m hermes_site.serve [daphne options] hermes_site.asgi:application`: Daphne, with Hermes's
start-up and shutdown.

It takes exactly Daphne's command line. What it adds:
- At start, before listening, the process announces itself (`agent.presence`) and interrupts the
  turns of Hermes processes that are gone, so their sessions answer at once after a restart.
- On SIGTERM or SIGINT Daphne cancels every connection's application at once and stops the event
  loop; running turns would die without a word (their tasks never finish) and their `/chat`
  clients would get neither `error` nor `done`. Here the running turns are interrupted first: each
  keeps its partial answer, ends `interrupted`, and its followers (an SSE stream, the control room)
  get `error` and `done` before the connections close. New questions meanwhile are refused (503).
  The process then records itself as stopped, so no one waits for it. Every step is bounded: with
  the database gone, a write would wait the pool's timeout (or longer on a dead connection), and a
  thread stuck in one would keep the interpreter from exiting; past `EXIT_DEADLINE_SECONDS` after
  the signal the process exits anyway (`os._exit`), so SIGTERM always stops it.
- The garbage collector is off while the process starts, and what start-up built is then frozen out
  of its sight (`hermes_site.collector`).
- A request body over the limit is refused as it arrives, not after Daphne has read all of it
  (`hermes_site.request_bodies`).
- Its event loop's lag is sampled for `/metrics` (`hermes_event_loop_lag_seconds`).
- Daphne's access log (written straight to its stream, not through `logging`) has the configured
  secrets redacted from each request line, percent-encoded ones included (`redact_uri`).
- Twisted's asyncio reactor runs on uvloop's event loop unless `HERMES_EVENT_LOOP=asyncio`: the
  standard loop's own Python code is a large share of a busy server's time (docs/performance.md).
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading
from collections.abc import Awaitable
from typing import Any

from hermes_site.collector import startup_begin, startup_end

startup_begin()

EVENT_LOOPS = ("uvloop", "asyncio")


def event_loop_install() -> tuple[str, asyncio.AbstractEventLoop]:
    """Install Twisted's asyncio reactor on the loop `HERMES_EVENT_LOOP` names; returns its name and it.

    Before Daphne is imported: `daphne.server` installs the reactor on a standard loop unless one is
    installed already.
    """
    from twisted.internet import asyncioreactor

    choice = os.environ.get("HERMES_EVENT_LOOP", "").strip().lower() or EVENT_LOOPS[0]
    if choice not in EVENT_LOOPS:
        sys.exit(f"HERMES_EVENT_LOOP must be one of {', '.join(EVENT_LOOPS)}, not {choice!r}")
    loop: asyncio.AbstractEventLoop
    if choice == "uvloop":
        import uvloop

        loop = uvloop.new_event_loop()
    else:
        loop = asyncio.new_event_loop()
    asyncioreactor.install(loop)
    return choice, loop


EVENT_LOOP, _loop = event_loop_install()

from daphne.access import AccessLogGenerator  # noqa: E402
from daphne.cli import CommandLineInterface  # noqa: E402
from daphne.server import Server  # noqa: E402
from twisted.internet import defer  # noqa: E402

from common.redaction import redact, redact_uri  # noqa: E402
from hermes_site.request_bodies import BoundedHTTPFactory  # noqa: E402

logger = logging.getLogger("hermes_site.serve")

# How long the running turns get to end and their streams to say so; within Docker's default
# 10 s stop timeout, so the SIGKILL that follows does not cut the shutdown short.
SHUTDOWN_GRACE_SECONDS = 6.0
# Then how long the connections get to write those last events before Daphne closes them.
DRAIN_SECONDS = 1.0
# Then how long the last bookkeeping (the process recorded as stopped) may take.
BOOKKEEPING_SECONDS = 1.5
# From the signal to the exit, whatever is stuck: still within Docker's 10 s.
EXIT_DEADLINE_SECONDS = SHUTDOWN_GRACE_SECONDS + DRAIN_SECONDS + BOOKKEEPING_SECONDS + 0.5


class RedactedAccessLog(AccessLogGenerator):
    """Daphne's NCSA access log with secrets redacted from the request line (`GET /search?q=...`)."""

    def write_entry(self, host: str, date: Any, request: str, *args: Any, **kwargs: Any) -> None:
        method, _, path = request.partition(" ")
        super().write_entry(host, date, f"{method} {redact_uri(path)}" if path else redact(request), *args, **kwargs)


class HermesServer(Server):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        logger_given = kwargs.get("action_logger")
        if isinstance(logger_given, AccessLogGenerator) and not isinstance(logger_given, RedactedAccessLog):
            kwargs["action_logger"] = RedactedAccessLog(logger_given.stream)
        super().__init__(*args, **kwargs)

    # `Server.run` builds Daphne's HTTP factory and listens with it in one method; taking the
    # assignment is the one place to put ours in its stead (request bodies refused as they arrive).
    @property
    def http_factory(self) -> BoundedHTTPFactory:
        return self._http_factory

    @http_factory.setter
    def http_factory(self, factory: Any) -> None:
        self._http_factory = factory if isinstance(factory, BoundedHTTPFactory) else BoundedHTTPFactory(self)

    def run(self) -> None:
        # Django is set up and the application loaded: the start-up is over.
        startup_end()
        from common.metrics import EventLoopLagProbe

        # Its first timer is due once the reactor runs the loop.
        EventLoopLagProbe(_loop).start()
        super().run()

    def kill_all_applications(self) -> Any:
        _exit_deadline_arm()
        future = asyncio.ensure_future(self._turns_shutdown())
        deferred = defer.Deferred.fromFuture(future)
        deferred.addErrback(lambda failure: logger.error("Graceful shutdown failed: %s", failure.getErrorMessage()))
        deferred.addBoth(lambda _: Server.kill_all_applications(self))
        return deferred

    async def _turns_shutdown(self) -> None:
        from channels.db import database_sync_to_async

        from agent import presence
        from agent.engine.runner import turns_shutdown
        from agent.live import turn_registry_close
        from agent.llm import llm_client_close

        interrupted = await turns_shutdown(
            reason="Hermes was stopped (restart or upgrade) while answering.", grace=SHUTDOWN_GRACE_SECONDS
        )
        if interrupted:
            logger.info("Interrupted %d running turn(s) for shutdown", interrupted)
            # The streams following those turns now write their last events and end.
            streams = [
                details["application_instance"]
                for details in self.connections.values()
                if details.get("application_instance") is not None and not details["application_instance"].done()
            ]
            if streams:
                await asyncio.wait(streams, timeout=DRAIN_SECONDS)
        await _bounded("closing the live registry", turn_registry_close(), DRAIN_SECONDS)
        await _bounded("closing the model client", llm_client_close(), DRAIN_SECONDS)
        await _bounded(
            "recording this process as stopped", database_sync_to_async(presence.presence_stop)(), BOOKKEEPING_SECONDS
        )


async def _bounded(what: str, work: Awaitable[Any], seconds: float) -> None:
    """A shutdown step that may not hold the shutdown up (the database may be gone)."""
    try:
        await asyncio.wait_for(work, seconds)
    except TimeoutError:
        logger.warning("Shutdown: gave up %s after %g s", what, seconds)
    except Exception as exc:
        logger.warning("Shutdown: %s failed: %s", what, str(exc).strip() or repr(exc))


def _exit_deadline_arm() -> None:
    """Exit the process `EXIT_DEADLINE_SECONDS` from now if it has not exited by then: a thread
    stuck in a database call would otherwise keep the interpreter from ending (it joins them)."""

    def exit_now() -> None:
        logger.warning("Shutdown did not finish within %g s (a database call hangs?): exiting", EXIT_DEADLINE_SECONDS)
        logging.shutdown()
        os._exit(1)

    timer = threading.Timer(EXIT_DEADLINE_SECONDS, exit_now)
    timer.daemon = True
    timer.start()


class HermesCommandLine(CommandLineInterface):
    server_class = HermesServer


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hermes_site.settings")
    import django

    django.setup(set_prefix=False)
    from django.db import connections

    logger.info("Serving on the %s event loop", EVENT_LOOP)

    from agent import presence

    try:
        presence.presence_start("web")
        # The main thread becomes the event loop's: it must not keep a database connection.
        connections.close_all()
    except Exception as exc:
        # A database that is not there yet must not keep the server from starting: turns announce
        # the process on first use, and `/healthz` says what is wrong.
        logger.warning("Could not announce this Hermes process at start-up: %s", str(exc).strip() or repr(exc))
    HermesCommandLine.entrypoint()


if __name__ == "__main__":
    main()
