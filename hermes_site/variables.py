"""The environment variables that configure Hermes, in one table.

`hermes_site/settings.py` reads every variable through `env()`, which knows only the names listed
here, and docs/configuration.md is generated from the same table:

    python -m hermes_site.variables > docs/configuration.md

tests/site/test_configuration.py fails when the table, the variables the code reads and the
document disagree. A variable that is no longer read is listed in `RETIRED` with what replaces it,
and setting it stops start-up (`retired_check`): an upgrade must not silently ignore an operator's
setting.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from common.logs import LOG_FORMATS
from hermes_site.environment import (
    Boolean,
    Choice,
    Integer,
    Listing,
    Networks,
    Number,
    Parser,
    PathPrefix,
    Text,
)

SETTINGS = "hermes_site/settings.py"

# Areas in the order docs/configuration.md shows them, with their headings.
AREAS = {
    "deploy": "Deployment",
    "storage": "Database and channel layer",
    "access": "Access control",
    "http": "HTTP",
    "logging": "Logging",
    "model": "The model",
    "turn": "Limits of one turn",
    "budget": "Daily token budgets",
    "tools": "Tools (MCP)",
    "oikos": "Oikos REST",
    "interop": "Agent interop (A2A)",
    "watch": "Proactive investigations",
    "matrix": "Matrix bridge",
    "evals": "Evals",
}


@dataclass(frozen=True)
class Variable:
    """One environment variable: how it is parsed, what it defaults to, and what it means."""

    name: str
    area: str
    parser: Parser
    default: Any
    doc: str
    # The default as the documentation shows it, when the value alone would mislead (a path, a
    # default that depends on another variable).
    shown: str = ""
    # The file that reads it, when that is not the settings (a script, or code that runs before Django).
    reader: str = SETTINGS

    def read(self, environ: Mapping[str, str], default: Any = None) -> Any:
        return self.parser(self.name, environ.get(self.name), self.default if default is None else default)

    def default_show(self) -> str:
        if self.shown:
            return self.shown
        value = self.default
        if value in ("", None, []):
            return "—"
        if isinstance(value, bool):
            return f"`{str(value).lower()}`"
        if isinstance(value, list):
            return f"`{','.join(value)}`"
        if isinstance(value, float):
            return f"`{value:g}`"
        return f"`{value}`"


V = Variable
# fmt: off
VARIABLES: tuple[Variable, ...] = (
    # --- deploy
    V("HERMES_ENV", "deploy", Choice(("development", "production")), "development",
      "`production`: HTTPS-only cookies, HSTS, redirects to HTTPS; requires `HERMES_SECRET_KEY` and "
      "`HERMES_ALLOWED_HOSTS`"),
    V("HERMES_DEBUG", "deploy", Boolean(), False, "Django debug mode (refused in production)"),
    V("HERMES_SECRET_KEY", "deploy", Text(), "", "Django's secret key; required when `HERMES_ENV=production`",
      shown="random, kept in `var/secret_key`"),
    V("HERMES_SECRET_KEY_FALLBACKS", "deploy", Listing(), [],
      "earlier secret keys, still accepted while a new one rolls out: signed cookies and sealed MCP OAuth "
      "credentials stay valid"),
    V("HERMES_ALLOWED_HOSTS", "deploy", Listing(), ["localhost", "127.0.0.1", "[::1]"],
      "host names Hermes answers to, on every surface (400 `host_not_allowed` otherwise)"),
    V("HERMES_DATA_DIR", "deploy", Text(), None, "where the SQLite database and the generated secret key live",
      shown="`var/`"),
    V("HERMES_STATIC_MANIFEST", "deploy", Boolean(), False,
      "serve hashed, compressed static files (needs `collectstatic` first; the container image sets it)"),
    V("HERMES_TIME_ZONE", "deploy", Text(), "UTC", "Django's time zone"),
    V("HERMES_BIND", "deploy", Text(), "", "the address Daphne listens on (`docker/start.sh`; the image sets "
      "`0.0.0.0`); `local` mode warns when it is not loopback", shown="`127.0.0.1`"),
    V("HERMES_PORT", "deploy", Integer(minimum=0), 8092, "the port `docker/start.sh` makes Daphne listen on "
      "(`hermes_site/dev.py`: 8000)", reader="docker/start.sh"),
    V("HERMES_ACCESS_LOG", "deploy", Boolean(), False, "`docker/start.sh`: one access-log line per request on "
      "stdout", reader="docker/start.sh"),
    V("HERMES_PYTHON", "deploy", Text(), "", "the interpreter `docker/start.sh` runs Hermes with",
      shown="the project's `.venv`, else `python3`", reader="docker/start.sh"),
    V("HERMES_DOTENV", "deploy", Text(), "", "the file `manage.py` commands read variables from when the "
      "environment lacks them (`make run` writes it; `/dev/null` reads nothing)", shown="`.env` in the repository",
      reader="common/dotenv.py"),
    V("HERMES_EVENT_LOOP", "deploy", Choice(("uvloop", "asyncio")), "uvloop",
      "the event loop the server (Daphne) runs on", reader="hermes_site/serve.py"),
    # --- storage
    V("DATABASE_URL", "storage", Text(), "", "e.g. `postgres://user@host:5432/hermes` (psycopg 3)",
      shown="SQLite in `var/`"),
    V("HERMES_DB_POOL_MAX", "storage", Integer(minimum=1), 10,
      "most PostgreSQL connections one Hermes process opens (docs/deploy.md: sizing for N processes)"),
    V("HERMES_DB_POOL_TIMEOUT", "storage", Number(minimum=0.1), 10.0,
      "seconds a request waits for a free connection before its `503 database_busy`"),
    V("REDIS_URL", "storage", Text(), "", "channel layer for more than one process, e.g. `redis://host:6379/0`",
      shown="in-memory layer"),
    V("HERMES_CHANNEL_PREFIX", "storage", Text(), "hermes",
      "prefix of Hermes's keys in Redis, for deployments that share one Redis database"),
    # --- access
    V("HERMES_AUTH", "access", Choice(("local", "proxy", "django")), "local",
      "who is asking: `local`, `proxy` or `django` (see docs/security.md)"),
    V("HERMES_TRUSTED_PROXY", "access", Boolean(), False, "`true` selects `HERMES_AUTH=proxy`"),
    V("HERMES_LOCAL_OPERATOR", "access", Text(), "operator",
      "who every request acts as in `local` mode (recorded on sessions, turns, the ledger and approval decisions)"),
    V("HERMES_TRUSTED_PROXY_CIDRS", "access", Networks(), [],
      "addresses of the sign-in proxy whose `X-Authentik-*` headers are believed (required by `proxy`)"),
    V("HERMES_STAFF_GROUPS", "access", Listing(), [],
      "proxy groups (`X-Authentik-Groups`) whose members get the admin"),
    V("HERMES_ALLOWED_CIDRS", "access", Networks(), ["127.0.0.0/8", "::1/128", "100.64.0.0/10"],
      "mesh_only: the only networks that may connect (the trusted proxies too)"),
    V("HERMES_HSTS_SECONDS", "access", Integer(minimum=0), None,
      "`Strict-Transport-Security` max-age (with `includeSubDomains` and `preload`)",
      shown="`31536000` in production, else `0`"),
    # --- http
    V("HERMES_URL_PREFIX", "http", PathPrefix(), "", "path prefix Hermes is served under behind a proxy, "
      "e.g. `/agent`"),
    V("HERMES_MAX_REQUEST_BYTES", "http", Integer(minimum=1024), 256 * 1024,
      "largest accepted request body (413 beyond) or websocket message (closed with 4009)"),
    V("HERMES_SSE_KEEPALIVE", "http", Number(minimum=0.05), 15.0,
      "seconds of silence before a `/chat` stream gets a keep-alive comment (for proxies with short idle timeouts)"),
    # --- logging
    V("HERMES_LOG_LEVEL", "logging", Text(), "INFO", "log level; `manage.py ask` logs at `WARNING` unless it is set "
      "(or `-v 2`)"),
    V("HERMES_LOG_FORMAT", "logging", Choice(LOG_FORMATS), "text",
      "`text` (readable lines) or `json` (one object per line)"),
    V("HERMES_REDACT", "logging", Listing(), [],
      "names of further variables whose values are secrets; redacted from logs, tool output and errors"),
    # --- model
    V("ANTHROPIC_API_KEY", "model", Text(), "", "key for the Messages API"),
    V("ANTHROPIC_BASE_URL", "model", Text(), "", "a compatible server instead (keyless if no key is set)",
      shown="Anthropic"),
    V("HERMES_MODEL", "model", Text(), "claude-sonnet-5", "model name; what a session uses unless switched"),
    V("HERMES_MODELS", "model", Text(), "", "comma list of further models an operator may pick per session",
      shown="(only `HERMES_MODEL`)"),
    V("HERMES_THINKING", "model", Choice(("adaptive", "off")), "adaptive",
      "`adaptive` (per model family, see docs/turns.md) or `off`"),
    V("HERMES_EFFORT", "model", Choice(("low", "medium", "high")), "high",
      "`output_config.effort`, or an older model's thinking budget"),
    V("HERMES_SOUL_PATH", "model", Text(), None, "persona file used as the system prompt",
      shown="`agent/SOUL.md`"),
    V("HERMES_LLM_TIMEOUT", "model", Number(minimum=1.0), 120.0,
      "seconds a model call may go without a stream event (pings do not count)"),
    V("HERMES_CONTEXT_WINDOW", "model", Integer(minimum=0), 0,
      "the model's context window in tokens; `0`: the model family's (200,000 for Claude); a smaller window is "
      "learned from a server's first \"prompt is too long\" refusal"),
    V("HERMES_COMPACT_AT", "model", Number(minimum=0.1), 0.75,
      "share of the window a request may fill before the session is compacted for the model (at most 0.95)"),
    # --- turn
    V("HERMES_MAX_ITERATIONS", "turn", Integer(minimum=1), 15, "tool rounds per turn before the forced final answer"),
    V("HERMES_MAX_TOKENS", "turn", Integer(minimum=1), 16_000,
      "`max_tokens` of each model call (thinking counts toward it)"),
    V("HERMES_TURN_TOKEN_BUDGET", "turn", Integer(minimum=1), 400_000,
      "tokens processed per turn before the forced final answer"),
    V("HERMES_TURN_TIMEOUT", "turn", Number(minimum=1.0), 600.0,
      "seconds per turn, forced final answer included (tool rounds stop a fifth of it, at most 60 s, earlier)"),
    V("HERMES_TOOL_RESULT_MAX_CHARS", "turn", Integer(minimum=200), 20_000,
      "characters of one tool result sent to the model"),
    V("HERMES_MAX_MESSAGE_CHARS", "turn", Integer(minimum=1), 32_000, "longest accepted question"),
    V("HERMES_RECALL_TOKENS", "turn", Integer(minimum=0), 2_000,
      "tokens of operators' notes a turn may be given (notes matching its question, runbooks first); `0`: no recall"),
    V("HERMES_TURN_STALE_SECONDS", "turn", Number(minimum=1.0), 90.0,
      "only when a turn's process cannot be probed (another host without the PostgreSQL presence lock): a running "
      "turn without heartbeat for this long is `interrupted`"),
    # --- budget
    V("HERMES_DAILY_TOKEN_BUDGET", "budget", Integer(minimum=0), 0,
      "tokens all turns may spend per day (input + output + cache read + cache write); `0`: unlimited"),
    V("HERMES_INVESTIGATION_DAILY_TOKEN_BUDGET", "budget", Integer(minimum=0), 0,
      "tokens investigations (sessions of origin `signal`) may spend per day; `0`: unlimited. They count against "
      "the daily budget too"),
    V("HERMES_BUDGET_RESERVE_SHARE", "budget", Number(minimum=0.0), 0.2,
      "share of the daily budget only operators' questions and investigations of critical signals may spend"),
    V("HERMES_PEER_BUDGET_SHARE", "budget", Number(minimum=0.0), 0.1,
      "share of the daily budget one peer (A2A or `mcp_serve`) may spend per day, unless its peers-file entry "
      "sets `budget_share`"),
    V("HERMES_BUDGET_TIMEZONE", "budget", Text(), "UTC", "the IANA time zone whose midnight starts a budget day"),
    V("HERMES_MODEL_PRICES", "budget", Text(), "",
      'JSON of per-model prices in USD per million tokens, laid over the bundled ones: `{"<model id or prefix>": '
      '{"input": 3, "output": 15, "cache_read": 0.3, "cache_write": 3.75}}`'),
    # --- tools
    V("HERMES_MCP_CONFIG", "tools", Text(), "", "path of an `mcpServers` JSON file"),
    V("OIKOS_MCP_URL", "tools", Text(), "", "the Oikos MCP endpoint (without a config file)"),
    V("OIKOS_MCP_TOKEN", "tools", Text(), "", "the Oikos MCP endpoint's bearer token (without a config file)"),
    V("HERMES_MCP_TIMEOUT", "tools", Number(minimum=1.0), 180.0,
      "per-call timeout of an MCP server, seconds, unless its entry in the config file sets `timeout`"),
    V("HERMES_OIKOS_SERVER", "tools", Text(), "oikos",
      "the MCP server that is Oikos: only its `request_execution` raises approvals; held to the Oikos tool "
      "allowlist"),
    V("HERMES_MCP_TOOLS_DENY", "tools", Listing(), [], "globs of tools no MCP server may offer"),
    # --- oikos
    V("OIKOS_API_URL", "oikos", Text(), "", "Oikos's REST API (health, approvals, executions, events)",
      shown="`OIKOS_MCP_URL` with `/mcp` → `/api/v1`"),
    V("OIKOS_API_TOKEN", "oikos", Text(), "",
      "the control room's bearer for Oikos's REST API (an operator-side token, never the agent's)"),
    V("OIKOS_LEDGER_URL", "oikos", Text(), "",
      "Oikos's ledger page; `{correlation_id}` in it is replaced, otherwise `?correlation_id=` is added"),
    # --- interop
    V("HERMES_A2A_SERVE", "interop", Boolean(), True, "serve the A2A endpoints (both dialects)"),
    V("HERMES_A2A_NAME", "interop", Text(), "hermes", "the name in the agent cards"),
    V("HERMES_A2A_PUBLIC_URL", "interop", Text(), "",
      "base URL peers reach Hermes at, for the agent cards (behind a proxy)", shown="from each request's host"),
    V("HERMES_A2A_GARRAIA_LOOPBACK_NO_TOKEN", "interop", Boolean(), False,
      "GarraIA-dialect routes accept token-less calls from loopback"),
    V("HERMES_A2A_GARRAIA_LOOPBACK_PEER", "interop", Text(), "garraia",
      "the peer those token-less calls are recorded as (its peers-file entry's name, for its allowances)"),
    V("HERMES_A2A_MAX_BODY_BYTES", "interop", Integer(minimum=1024), 256 * 1024, "largest A2A request body"),
    V("HERMES_A2A_SERVER_MAX_TURNS", "interop", Integer(minimum=1), 20, "turns per inbound conversation"),
    V("HERMES_A2A_SERVER_TURN_TIMEOUT", "interop", Number(minimum=1.0), 110.0,
      "seconds a turn a peer asked for may run (below the peer's own timeout: GarraIA's client waits 120 s)"),
    V("HERMES_A2A_RATE_WINDOW", "interop", Number(minimum=1.0), 60.0, "seconds of the A2A rate windows"),
    V("HERMES_A2A_RATE_LIMIT", "interop", Integer(minimum=1), 30,
      "turns one peer may start per window (A2A and `mcp_serve`; a peers-file `rate_limit` overrides it per peer)"),
    V("HERMES_A2A_PEERS", "interop", Text(), "",
      "path of the peers file: the peers Hermes may talk to and each one's limits (`a2a_send` is offered only "
      "with peers)"),
    # --- watch
    V("HERMES_WATCH_POLICY_FILE", "watch", Text(), "",
      "a JSON file of the trigger policy: `kinds`, `min_severity`, `include`, `exclude`, `cooldown_seconds`, "
      "`hourly_cap`, `incident_window_seconds` (each absent key keeps its default; docs/investigations.md)"),
    V("HERMES_WATCH_BACKLOG", "watch", Choice(("skip", "replay")), "skip",
      "a watcher starting on an empty database: `skip` Oikos's backlog, or `replay` the last hour of it"),
    V("HERMES_INVESTIGATIONS_MAY_PROPOSE", "watch", Boolean(), False,
      "investigations may propose executions, which wait in Hermes for an operator's approval"),
    # --- matrix
    V("HERMES_MATRIX_HOMESERVER", "matrix", Text(), "",
      "the Matrix homeserver's URL; with the two below, enables `manage.py matrix_bridge`"),
    V("HERMES_MATRIX_USER_ID", "matrix", Text(), "", "the bot's Matrix user id (`@hermes:example.net`)"),
    V("HERMES_MATRIX_ACCESS_TOKEN", "matrix", Text(), "", "the bot's access token (redacted like every secret)"),
    V("HERMES_MATRIX_ROOMS", "matrix", Listing(), [],
      "the room ids the bridge serves (`!abc:example.net`); every other room is ignored"),
    V("HERMES_MATRIX_OPERATORS", "matrix", Text(), "",
      "who may ask and decide: `@alice:example.net=alice,@bob:example.net=bob` (Matrix user = operator name)"),
    V("HERMES_MATRIX_ESCALATION_ROOM", "matrix", Text(), "",
      "a room id where each investigation is posted as a thread (served like the rooms above)"),
    V("HERMES_MATRIX_EDIT_SECONDS", "matrix", Number(minimum=0.0), 1.5,
      "at most one edit of a streaming answer per this many seconds (for homeservers with strict rate limits)"),
    V("HERMES_MATRIX_CONTROLROOM_URL", "matrix", Text(), "",
      "the address operators open Hermes at (`https://hermes.example.net`, without `HERMES_URL_PREFIX`), "
      "for links to sessions in the bridge's messages; empty: no links"),
    # --- evals
    V("HERMES_EVALS_CASES_DIR", "evals", Text(), "",
      "the directory eval case files are read from and \"Save as eval case\" writes to (a deployed Hermes may "
      "not be able to write into its code: point it at a directory you review)",
      shown="the repository's `evals/cases/`"),
)
# fmt: on

_BY_NAME = {variable.name: variable for variable in VARIABLES}

_CONSTANT = "fixed in hermes_site/settings.py"
_POLICY_KEY = "the `{key}` key of the JSON file HERMES_WATCH_POLICY_FILE names (docs/investigations.md)"
_PEER_FIELD = "the `{key}` field of each peer's entry in the HERMES_A2A_PEERS file (docs/interop.md)"

# Variables Hermes no longer reads, and what took their place.
RETIRED = {
    "HERMES_MAX_JSON_DEPTH": "fixed at 32 levels (access/documents.py)",
    "HERMES_CARD_CONTEXT_TTL": _CONSTANT,
    "HERMES_CARD_CONTEXT_TIMEOUT": _CONSTANT,
    "HERMES_LLM_RETRIES": _CONSTANT,
    "HERMES_ELICITATION_TIMEOUT": f"{_CONSTANT}; an MCP server's `timeout` in HERMES_MCP_CONFIG bounds the wait",
    "HERMES_LEDGER_RESULT_MAX_CHARS": _CONSTANT,
    "HERMES_REDIS_MAX_CONNECTIONS": "fixed in hermes_site/channel_layers.py",
    "HERMES_DB_POOL_MIN": "fixed at 2 (never above HERMES_DB_POOL_MAX)",
    "HERMES_HSTS_PRELOAD": "on whenever HSTS is (HERMES_HSTS_SECONDS > 0)",
    "HERMES_TOKEN_COUNTING": f"{_CONSTANT}; a server without token counting is detected and estimated for",
    "HERMES_COMPACT_KEEP_TURNS": _CONSTANT,
    "HERMES_A2A_PEER_KEEP": _CONSTANT,
    "HERMES_A2A_SEND_RATE_LIMIT": _CONSTANT,
    "HERMES_A2A_CONVERSATION_SECONDS": "fixed in interop/outbound.py",
    "HERMES_WATCH_BACKLOG_MAX_AGE_SECONDS": "fixed at one hour (watch/watcher.py)",
    "OIKOS_API_TIMEOUT": _CONSTANT,
    "HERMES_STATIC_ROOT": "fixed at staticfiles/ in the source tree",
    "HERMES_WATCH_KINDS": _POLICY_KEY.format(key="kinds"),
    "HERMES_WATCH_MIN_SEVERITY": _POLICY_KEY.format(key="min_severity"),
    "HERMES_WATCH_INCLUDE": _POLICY_KEY.format(key="include"),
    "HERMES_WATCH_EXCLUDE": _POLICY_KEY.format(key="exclude"),
    "HERMES_WATCH_COOLDOWN_SECONDS": _POLICY_KEY.format(key="cooldown_seconds"),
    "HERMES_WATCH_HOURLY_CAP": _POLICY_KEY.format(key="hourly_cap"),
    "HERMES_A2A_MAX_TURNS": _PEER_FIELD.format(key="max_turns"),
    "HERMES_A2A_TIMEOUT": _PEER_FIELD.format(key="timeout"),
    "HERMES_A2A_MAX_CHARS": _PEER_FIELD.format(key="max_chars"),
    "HERMES_A2A_STOP_MARKER": _PEER_FIELD.format(key="stop_marker"),
}


def env(name: str, default: Any = None) -> Any:
    """The value of the variable `name` from the environment; `default` overrides the table's when given.

    A name missing from the table is a `KeyError`: every variable read is documented.
    """
    variable = _BY_NAME[name]
    if variable.reader != SETTINGS:
        raise KeyError(f"{name} is read by {variable.reader}, not by the settings")
    return variable.read(os.environ, default)


def env_set(name: str) -> bool:
    """Whether the variable `name` is set to something, for rules that depend on an explicit choice."""
    return bool(os.environ.get(_BY_NAME[name].name))


def retired_check(environ: Mapping[str, str]) -> None:
    """Stop start-up when a retired variable is set, naming what replaces each one.

    An error, not a warning: at settings time no log handler exists yet, and an operator's watch
    policy or peer limits silently falling back to defaults would change what Hermes does.
    """
    found = [name for name in RETIRED if name in environ]
    if found:
        lines = "; ".join(f"{name} is no longer read: {RETIRED[name]}" for name in found)
        raise ImproperlyConfigured(f"{lines}. Remove {'it' if len(found) == 1 else 'them'} from the environment.")


def configuration_markdown() -> str:
    """docs/configuration.md: the table, grouped by area."""
    lines = [
        "# Configuration",
        "",
        "<!-- Generated from hermes_site/variables.py; do not edit. Regenerate with:",
        "     python -m hermes_site.variables > docs/configuration.md -->",
        "",
        "Hermes is configured by environment variables only; with none set it runs embedded (SQLite, an",
        "in-memory channel layer, a local operator). A malformed value stops start-up with the variable's",
        "name. Comma lists drop blanks.",
    ]
    for area, title in AREAS.items():
        lines += ["", f"## {title}", "", "| variable | default | type | meaning |", "|---|---|---|---|"]
        lines += [_row(variable) for variable in VARIABLES if variable.area == area]
    lines += ["", "## No longer read", "", "Setting one of these stops start-up with this message.", ""]
    lines += ["| variable | replaced by |", "|---|---|"]
    lines += [f"| `{name}` | {replacement} |" for name, replacement in RETIRED.items()]
    return "\n".join(lines) + "\n"


def _row(variable: Variable) -> str:
    reader = "" if variable.reader == SETTINGS else f" (read by `{variable.reader}`)"
    return f"| `{variable.name}` | {variable.default_show()} | {variable.parser.kind} | {variable.doc}{reader} |"


if __name__ == "__main__":
    print(configuration_markdown(), end="")
