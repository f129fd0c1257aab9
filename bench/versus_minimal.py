"""Hermes against the least any agent can do, in one run: one warm turn, and 200 turns at once.

The minimal loop is run here, by this script: the raw anthropic SDK and a raw MCP client (one of
each, connected once, as a small service would keep them), a tool loop, nothing stored, nothing
published. Hermes is one real Daphne process answering `POST /chat` as Server-Sent Events, storing
everything and publishing every turn to its channel layer. Both ask the same fakes, started here:
the scripted model (`tests/fakes/anthropic_api.py`, health summary → blast radius → a streamed
answer, 5 ms between stream events) and oikos_sim's MCP server over loopback HTTP, each in a
process of its own (`bench/fakes_serve.py`), so neither shares an interpreter with what is measured.

Printed, per database (SQLite with the in-memory layer, PostgreSQL with Redis):
- one warm turn: the median of `--turns` alternating turns each side, and their ratio (target ≤ 1.10x);
- `--concurrency` turns at once (`--rounds` batches, each side in turn, and the medians of their
  ratios): each side's wall, the ratio (target ≤ 1.5x), failures (target 0),
  and the p99 over streams of each stream's longest silence — the longest gap between two events
  it received, counted from the moment it asked (target ≤ 1.3x the minimal loop's own: on two shared
  cores no agent reaches an absolute figure), and CPU per turn (target ≤ 1.25x); then, from Daphne's `/metrics`
  over the batch, how late its event loop ran, how many model calls failed and were retried and how
  many tool calls failed, and each database call's wait for a thread and run.

    .venv/bin/python bench/versus_minimal.py                      # SQLite + in-memory layer
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/hermes_bench REDIS_URL=redis://127.0.0.1:6379/5 \\
        .venv/bin/python bench/versus_minimal.py --on postgres    # or --on both
    # ... --on postgres --servers 2: the turns at once spread over two Daphne processes (scale-out)

For PostgreSQL, the database `<name>_versus` is created beside DATABASE_URL's and dropped at the
end. A measurement, not a test: it prints figures (the machine's load inflates both sides alike;
the ratios are what to compare) and exits non-zero only when a turn failed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import anthropic  # noqa: E402
import httpx2  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

from tests.fakes.daphne import DaphneServer, LiveDatabase  # noqa: E402
from tests.observability.scrape import Scrape  # noqa: E402

MODEL = "claude-sonnet-5"


@dataclass(frozen=True)
class TurnRun:
    """One turn as its asker saw it: wall seconds, the longest gap between two events, and how it ended."""

    wall: float
    silence: float
    ok: bool
    problem: str = ""


class Silences:
    """The longest gap between two events of one stream, from the moment the question was sent."""

    def __init__(self) -> None:
        self.started = self.last = time.perf_counter()
        self.longest = 0.0

    def event(self) -> None:
        now = time.perf_counter()
        self.longest = max(self.longest, now - self.last)
        self.last = now


# --- the minimal loop ------------------------------------------------------------------------------


class MinimalLoop:
    """The raw SDKs and a tool loop: what a turn costs with nothing stored and nobody following."""

    def __init__(self, model: anthropic.AsyncAnthropic, mcp: Client, tools: list[dict[str, Any]]) -> None:
        self.model = model
        self.mcp = mcp
        self.tools = tools

    async def turn(self, question: str) -> TurnRun:
        silences = Silences()
        messages: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "text", "text": question}]}]
        try:
            while True:
                async with self.model.messages.stream(
                    model=MODEL,
                    max_tokens=4096,
                    messages=messages,  # type: ignore[arg-type]
                    tools=self.tools,  # type: ignore[arg-type]
                ) as stream:
                    async for event in stream:
                        if event.type in ("text", "content_block_stop"):
                            silences.event()
                    message = await stream.get_final_message()
                messages.append(
                    {"role": "assistant", "content": [block.model_dump(exclude_none=True) for block in message.content]}
                )
                calls = [block for block in message.content if block.type == "tool_use"]
                if not calls:
                    break
                results = await asyncio.gather(*(self._call(call) for call in calls))
                silences.event()
                messages.append({"role": "user", "content": list(results)})
        except Exception as exc:
            return TurnRun(
                time.perf_counter() - silences.started, silences.longest, False, f"{type(exc).__name__}: {exc}"
            )
        return TurnRun(time.perf_counter() - silences.started, silences.longest, True)

    async def _call(self, call: Any) -> dict[str, Any]:
        result = await self.mcp.call_tool(call.name, call.input)
        text = "".join(getattr(block, "text", "") for block in result.content)
        return {"type": "tool_result", "tool_use_id": call.id, "content": text, "is_error": result.is_error}


@contextlib.asynccontextmanager
async def minimal_loop(model_url: str, api_key: str, mcp_url: str, token: str) -> Any:
    # httpx's default limits (100 connections), as Hermes's MCP client has: oikos_sim listens with
    # a backlog of 128, and 200 connections opened at once would be refused.
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http,
        Client(streamable_http_client(mcp_url, http_client=http)) as mcp,
    ):
        tools = [
            {"name": tool.name, "description": tool.description or "", "input_schema": tool.input_schema}
            for tool in (await mcp.list_tools()).tools
        ]
        model = anthropic.AsyncAnthropic(base_url=model_url, api_key=api_key, max_retries=0)
        yield MinimalLoop(model, mcp, tools)
        await model.close()


# --- Hermes over POST /chat ------------------------------------------------------------------------


async def hermes_turn(client: httpx2.AsyncClient, url: str, question: str) -> TurnRun:
    """`POST /chat`, its SSE stream read to `done`; every `event:` line is an event (comments are not)."""
    silences = Silences()
    event = ""
    try:
        async with client.stream("POST", f"{url}/chat", json={"message": question}) as response:
            if response.status_code != 200:
                body = (await response.aread()).decode("utf-8", "replace")
                return _failed(silences, f"HTTP {response.status_code}: {body[:200]}")
            async for line in response.aiter_lines():
                if line.startswith("event:"):
                    silences.event()
                    event = line.removeprefix("event:").strip()
                elif line.startswith("data:") and event == "error":
                    return _failed(silences, "error event: " + json.loads(line[5:]).get("message", "")[:200])
                elif line.startswith("data:") and event == "done":
                    status = json.loads(line[5:]).get("status")
                    if status != "done":
                        return _failed(silences, f"done: {status}")
                    return TurnRun(time.perf_counter() - silences.started, silences.longest, True)
    except httpx2.HTTPError as exc:
        return _failed(silences, f"{type(exc).__name__}: {exc}")
    return _failed(silences, "the stream ended without `done`")


def _failed(silences: Silences, problem: str) -> TurnRun:
    return TurnRun(time.perf_counter() - silences.started, silences.longest, False, problem)


def _http(concurrency: int) -> httpx2.AsyncClient:
    limits = httpx2.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    return httpx2.AsyncClient(limits=limits, timeout=httpx2.Timeout(300, connect=30))


# --- measuring -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Batch:
    wall: float
    runs: list[TurnRun]
    # CPU seconds the process doing the turns spent on the batch, when it could be read.
    cpu: float | None = None

    @property
    def failed(self) -> list[TurnRun]:
        return [run for run in self.runs if not run.ok]

    def silence_p99(self) -> float:
        silences = sorted(run.silence for run in self.runs)
        return silences[min(len(silences) - 1, int(len(silences) * 0.99))]

    def median(self) -> float:
        return statistics.median(run.wall for run in self.runs)


def _cpu_seconds(pids: list[int] | None) -> float | None:
    """CPU seconds (user + system) used so far by `pids` together, or by this process when None;
    None if unreadable."""
    if pids is None:
        return time.process_time()
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return None
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


async def _batch(turns: list[Any], *, pids: list[int] | None = None) -> Batch:
    """The turns at once; `pids`: the processes doing them (None: this one, as for the minimal loop)."""
    cpu_before = _cpu_seconds(pids)
    started = time.perf_counter()
    runs = await asyncio.gather(*turns)
    wall = time.perf_counter() - started
    cpu_after = _cpu_seconds(pids)
    cpu = cpu_after - cpu_before if cpu_before is not None and cpu_after is not None else None
    return Batch(wall, list(runs), cpu)


async def _measure(
    *,
    hermes_urls: list[str],
    hermes_pids: list[int],
    model_url: str,
    api_key: str,
    mcp_url: str,
    token: str,
    turns: int,
    concurrency: int,
    rounds: int,
) -> int:
    hermes_url = hermes_urls[0]
    async with minimal_loop(model_url, api_key, mcp_url, token) as minimal, _http(concurrency) as http:
        # Warm both: connections open, tools listed, code paths taken once (in every server).
        for _ in range(2):
            await minimal.turn("warm-up")
            for url in hermes_urls:
                warm = await hermes_turn(http, url, "warm-up")
                if not warm.ok:
                    raise RuntimeError(f"Hermes's warm-up turn failed: {warm.problem}")
        # Alternating, so drift on a busy machine hits both alike.
        bare, hermes = [], []
        _progress(f"{turns} warm turns each, alternating")
        for number in range(turns):
            bare.append(await minimal.turn(f"one turn {number}"))
            hermes.append(await hermes_turn(http, hermes_url, f"one turn {number}"))
        bare_ms = statistics.median(run.wall for run in bare) * 1000
        hermes_ms = statistics.median(run.wall for run in hermes) * 1000
        print(
            f"  one warm turn (median of {turns}): minimal {bare_ms:.0f} ms, Hermes {hermes_ms:.0f} ms "
            f"-> {hermes_ms / bare_ms:.2f}x (target <= 1.10x)"
        )
        failures = sum(not run.ok for run in bare + hermes)
        ratios: list[tuple[float, float, float]] = []
        for number in range(rounds):
            label = f" (round {number + 1} of {rounds})" if rounds > 1 else ""
            _progress(f"minimal loop: {concurrency} turns at once{label}")
            base = await _batch([minimal.turn(f"at once {i}") for i in range(concurrency)])
            _progress(f"Hermes: {concurrency} turns at once{label}")
            inside_before = await _server_metrics(http, hermes_urls)
            # Spread over the servers in turn, as a proxy balancing requests would.
            asked = [hermes_turn(http, hermes_urls[i % len(hermes_urls)], f"at once {i}") for i in range(concurrency)]
            ours = await _batch(asked, pids=hermes_pids)
            inside = (inside_before, await _server_metrics(http, hermes_urls))
            servers = "" if len(hermes_urls) == 1 else f", Hermes over {len(hermes_urls)} Daphne processes"
            print(f"  {concurrency} turns at once{label} (CPU: of the processes doing the turns, per turn{servers}):")
            print(f"    {'':8} {'wall s':>7} {'p50 s':>6} {'failed':>6} {'silence p99 ms':>15} {'CPU ms':>7}")
            for name, batch in (("minimal", base), ("Hermes", ours)):
                cpu = f"{batch.cpu / concurrency * 1000:>7.0f}" if batch.cpu is not None else f"{'-':>7}"
                print(
                    f"    {name:8} {batch.wall:>7.2f} {batch.median():>6.2f} {len(batch.failed):>6} "
                    f"{batch.silence_p99() * 1000:>15.0f} {cpu}"
                )
            cpu_ratio = ours.cpu / base.cpu if ours.cpu and base.cpu else float("nan")
            silence_ratio = ours.silence_p99() / base.silence_p99()
            print(
                f"    wall ratio {ours.wall / base.wall:.2f}x (target <= 1.5x), Hermes failures {len(ours.failed)} "
                f"(target 0), CPU per turn ratio {cpu_ratio:.2f}x (target <= 1.25x), "
                f"silence p99 ratio {silence_ratio:.2f}x (target <= 1.3x)"
            )
            for problem in sorted({run.problem for run in ours.failed + base.failed})[:5]:
                print(f"    failed: {problem}")
            _print_inside(*inside, wall=ours.wall)
            failures += len(ours.failed) + len(base.failed)
            ratios.append((ours.wall / base.wall, cpu_ratio, silence_ratio))
        if rounds > 1:
            walls, cpus, silences = (sorted(column) for column in zip(*ratios, strict=True))
            print(
                f"  over {rounds} rounds, median (range): wall ratio {statistics.median(walls):.2f}x "
                f"({walls[0]:.2f}-{walls[-1]:.2f}x; target <= 1.5x), CPU per turn ratio {statistics.median(cpus):.2f}x "
                f"({cpus[0]:.2f}-{cpus[-1]:.2f}x; target <= 1.25x), silence p99 ratio "
                f"{statistics.median(silences):.2f}x (target <= 1.3x)"
            )
        return failures


async def _server_metrics(http: httpx2.AsyncClient, urls: list[str]) -> Scrape:
    """Every server's `/metrics`, summed (their counters and histograms add up)."""
    total: dict[Any, float] = {}
    for url in urls:
        response = await http.get(f"{url}/metrics")
        response.raise_for_status()
        for key, value in Scrape.parse(response.text).samples.items():
            total[key] = total.get(key, 0.0) + value
    return Scrape(total)


def _print_inside(before: Scrape, after: Scrape, *, wall: float) -> None:
    """What Daphne's own metrics saw over the batch: how late its event loop ran, the model calls
    retried and tool calls failed (a connection reused as its server closed it shows here), and its
    database calls' wait for a thread and run there — where a stream's silences come from. With several servers,
    the lag is the mean over their loops and "ran late" sums them."""
    lag = "hermes_event_loop_lag_seconds"
    samples = after.delta(before, f"{lag}_count")
    if samples:
        late = after.delta(before, f"{lag}_sum")
        over = samples - after.delta(before, f"{lag}_bucket", le="0.25")
        print(
            f"    inside Daphne: event loop lag mean {late / samples * 1000:.0f} ms over {samples:.0f} samples, "
            f"{over:.0f} over 250 ms; the loop ran late {late / wall:.0%} of the batch's wall"
        )
    attempts = _summed(before, after, "hermes_llm_call_duration_seconds_count")
    retried = _summed(before, after, "hermes_llm_call_duration_seconds_count", outcome="retry")
    tool_errors = _summed(before, after, "hermes_tool_call_errors_total")
    print(
        f"    inside Daphne: {attempts:.0f} model call attempts, {retried:.0f} of them failed and retried; "
        f"{tool_errors:.0f} tool calls failed"
    )
    timed = "hermes_db_call_duration_seconds"
    calls = sorted({series["call"] for series in after.labelled(f"{timed}_count")})
    rows = []
    for call in calls:
        count = after.delta(before, f"{timed}_count", call=call, phase="run")
        if count:
            wait = after.delta(before, f"{timed}_sum", call=call, phase="wait") / count * 1000
            run = after.delta(before, f"{timed}_sum", call=call, phase="run") / count * 1000
            rows.append((count * (wait + run), call, count, wait, run))
    if rows:
        print("    inside Daphne: database calls, mean ms waiting for a thread / running there:")
        for _, call, count, wait, run in sorted(rows, reverse=True)[:8]:
            print(f"      {call:28} {count:>6.0f} x {wait:>7.1f} / {run:>6.1f}")


def _summed(before: Scrape, after: Scrape, name: str, **labels: str) -> float:
    """A metric's growth over the batch, summed over every series that carries `labels`."""
    return sum(
        after.delta(before, name, **series)
        for series in after.labelled(name)
        if all(series.get(key) == value for key, value in labels.items())
    )


def _progress(what: str) -> None:
    """Where the run is, on stderr (a profiler attached to the server can start at the right moment)."""
    print(f"    ... {what}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def _environment(**values: str | None) -> Iterator[None]:
    """`os.environ` with these values (None: unset) for the block: `LiveDatabase` and `DaphneServer` read it."""
    saved = {name: os.environ.get(name) for name in values}
    try:
        for name, value in values.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextlib.contextmanager
def _served(kind: str) -> Iterator[dict[str, str]]:
    """`bench/fakes_serve.py <kind>` in a process of its own; what it printed (its URLs)."""
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "bench" / "fakes_serve.py"), kind],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdin is not None and process.stdout is not None
    try:
        line = process.stdout.readline()
        if not line:
            raise RuntimeError(f"the fake {kind} did not start")
        yield json.loads(line)
    finally:
        process.stdin.close()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _run_on(backend: str, args: argparse.Namespace, directory: Path) -> int:
    if backend == "postgres":
        settings = {"DATABASE_URL": os.environ.get("DATABASE_URL"), "REDIS_URL": os.environ.get("REDIS_URL")}
        label = "PostgreSQL + Redis channel layer"
    else:
        settings = {"DATABASE_URL": None, "REDIS_URL": None}
        label = "SQLite + in-memory channel layer"
    with _environment(**settings):
        database = LiveDatabase.create(directory, name="versus")
        try:
            with _served("oikos") as oikos, _served("model") as model:
                env = {
                    "ANTHROPIC_BASE_URL": model["url"],
                    "ANTHROPIC_API_KEY": model["api_key"],
                    "OIKOS_MCP_URL": oikos["mcp_url"],
                    "OIKOS_MCP_TOKEN": oikos["token"],
                    "HERMES_MODEL": MODEL,
                    "HERMES_LOG_LEVEL": "WARNING",
                    **dict(item.split("=", 1) for item in args.server_env),
                }
                with contextlib.ExitStack() as servers:
                    hermes = []
                    for number in range(args.servers):
                        log = directory / f"daphne-{backend}-{number}.log"
                        hermes.append(servers.enter_context(DaphneServer(database=database, env=env, log_path=log)))
                    print(f"{label} (Daphne log: {hermes[0].log_path})")
                    return asyncio.run(
                        _measure(
                            hermes_urls=[server.url for server in hermes],
                            hermes_pids=[server.pid for server in hermes],
                            model_url=model["url"],
                            api_key=model["api_key"],
                            mcp_url=oikos["mcp_url"],
                            token=oikos["token"],
                            turns=args.turns,
                            concurrency=args.concurrency,
                            rounds=args.rounds,
                        )
                    )
        finally:
            database.drop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--on", choices=("sqlite", "postgres", "both"), default="sqlite")
    parser.add_argument("--turns", type=int, default=9, help="warm turns each side, alternating")
    parser.add_argument("--concurrency", type=int, default=200)
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="batches of --concurrency turns at once, each side in turn; with more than one, the medians "
        "of the ratios are printed too (a shared machine's load moves single batches by 0.1-0.3x)",
    )
    parser.add_argument(
        "--servers",
        type=int,
        default=1,
        help="Daphne processes sharing the turns at once (PostgreSQL + Redis only): the scale-out figure, "
        "beside the targets' one process",
    )
    parser.add_argument(
        "--server-env", action="append", default=[], metavar="NAME=VALUE", help="extra environment for Daphne"
    )
    args = parser.parse_args()
    backends = ["sqlite", "postgres"] if args.on == "both" else [args.on]
    if "postgres" in backends and not (
        os.environ.get("DATABASE_URL", "").startswith(("postgres://", "postgresql://"))
        and os.environ.get("REDIS_URL", "").startswith("redis")
    ):
        sys.exit("--on postgres runs Hermes as deployed for scale-out: set DATABASE_URL=postgres://... and REDIS_URL")
    if args.rounds < 1:
        sys.exit("--rounds N: at least 1")
    if args.servers < 1 or (args.servers > 1 and backends != ["postgres"]):
        sys.exit("--servers N: at least 1, and more than 1 only --on postgres (SQLite is one process's database)")
    directory = Path(tempfile.mkdtemp(prefix="hermes-versus-"))
    # The minimal loop runs in this process: what its imports built is kept out of its collections,
    # as Hermes keeps its start-up out of its own (hermes_site/collector.py), so neither side's
    # figure includes walking a heap of loaded code.
    gc.freeze()
    failures = sum(_run_on(backend, args, directory) for backend in backends)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
