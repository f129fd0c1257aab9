"""Hermes settings: one module, driven entirely by the environment.

Embedded defaults (SQLite, in-memory channel layer, local operator) need no configuration at all;
`DATABASE_URL` and `REDIS_URL` switch to PostgreSQL and Redis for scale-out. Every variable is read
through `env()` from the table in hermes_site/variables.py, which also generates
docs/configuration.md. Tuning that an operator has no reason to change is a plain constant here,
still a Django setting so that tests can shrink it.
"""

from __future__ import annotations

import os
import re
import zoneinfo
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from common.logs import logging_config
from hermes_site.secret_key import secret_key_load
from hermes_site.variables import env, env_set, retired_check

# Before anything else: a retired variable must stop start-up, not be silently ignored.
retired_check(os.environ)

BASE_DIR = Path(__file__).resolve().parent.parent
DATA_DIR = Path(env("HERMES_DATA_DIR", str(BASE_DIR / "var")))

# --- Django core -----------------------------------------------------------------------------------

# `production` means "served to browsers over HTTPS": secure cookies, HSTS, redirects to HTTPS (see
# "Access control" below), and no start without an explicit secret key and host list. The default,
# `development`, needs no configuration at all.
HERMES_ENV = env("HERMES_ENV")
PRODUCTION = HERMES_ENV == "production"

DEBUG = env("HERMES_DEBUG")
if PRODUCTION and DEBUG:
    raise ImproperlyConfigured("HERMES_DEBUG must be off when HERMES_ENV=production: debug pages show settings.")

SECRET_KEY = env("HERMES_SECRET_KEY")
if not SECRET_KEY:
    if PRODUCTION:
        raise ImproperlyConfigured(
            "HERMES_SECRET_KEY must be set when HERMES_ENV=production (every Hermes process of a deployment "
            "needs the same one), e.g. the output of: python -c 'import secrets; print(secrets.token_urlsafe(50))'"
        )
    # Random per installation and kept across restarts; never a key that ships with the source.
    SECRET_KEY = secret_key_load(DATA_DIR / "secret_key")
# Earlier secret keys, still accepted while a new one rolls out: signed cookies made with them stay
# valid, and MCP OAuth credentials sealed with them still open (agent/tools/oauth/sealing.py).
SECRET_KEY_FALLBACKS = env("HERMES_SECRET_KEY_FALLBACKS")

if PRODUCTION and not env_set("HERMES_ALLOWED_HOSTS"):
    raise ImproperlyConfigured(
        "HERMES_ALLOWED_HOSTS must name the host(s) browsers reach Hermes at when HERMES_ENV=production, "
        "e.g. oikos.example.net"
    )
ALLOWED_HOSTS = env("HERMES_ALLOWED_HOSTS")

INSTALLED_APPS = [
    # Before staticfiles: its `runserver` is Daphne's (HTTP and websockets from one ASGI process).
    # Not the `daphne` app itself, whose import installs Twisted's reactor in every process that
    # sets Django up, `manage.py ask` included; Hermes is served by `python -m hermes_site.serve`.
    "hermes_site",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "django_htmx",
    "access",
    "agent",
    "oikos",
    "api",
    "interop",
    "controlroom",
    "watch",
    "matrix",
    "evals",
]

# Network checks (mesh_only) and size limits run before Django, in the ASGI edge (hermes_site/asgi.py).
# Django's middleware in subclasses whose hooks run on the event loop where they cannot block
# (`hermes_site.middleware`): otherwise each hook is a thread hop, a dozen per request. (Security,
# CSRF and clickjacking stay Django's: `check --deploy` knows them by name.)
MIDDLEWARE = [
    "access.headers.content_security_policy_middleware",
    "django.middleware.security.SecurityMiddleware",
    # WhiteNoise, async-capable: one sync middleware would run every request in a thread of its own.
    "hermes_site.static_files.AsyncWhiteNoiseMiddleware",
    # Outside the identity and CSRF checks, so it sees their refusals of approval decisions too.
    "controlroom.middleware.decision_attempts_middleware",
    "hermes_site.middleware.InlineSessionMiddleware",
    "hermes_site.middleware.InlineCommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "hermes_site.middleware.InlineAuthenticationMiddleware",
    # Who is asking (HERMES_AUTH); refuses requests that may not be served before any view runs.
    "access.middleware.operator_identity_middleware",
    "hermes_site.middleware.InlineMessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "hermes_site.urls"
ASGI_APPLICATION = "hermes_site.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# --- Database --------------------------------------------------------------------------------------

# SQLite as shipped raises "database is locked" under a handful of concurrent turns; IMMEDIATE
# transactions, a busy timeout and WAL make it behave under the embedded single-process default.
_SQLITE_OPTIONS = {
    "transaction_mode": "IMMEDIATE",
    "timeout": 20,
    # NORMAL: commits are not synced, except each turn's end, which syncs the WAL with everything
    # before it (agent/store/turns.py, `_synced`).
    "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
}

# PostgreSQL connections come from one pool per process (psycopg_pool, through Django): at most
# HERMES_DB_POOL_MAX open at once, however many threads and turns ask. Django keeps one connection
# per thread, and under Daphne every request runs on a thread of its own: persistent per-thread
# connections (CONN_MAX_AGE) outlived their threads and exhausted PostgreSQL under load. With the
# pool, CONN_MAX_AGE must be 0: a thread hands its connection back whenever Django closes it
# (`database_sync_to_async` and the turn engine's `common.db.db_call`, whose threads number at most
# HERMES_DB_POOL_MAX, do so after every call), and the next call takes one from the pool
# without reconnecting. A caller that finds every connection taken waits HERMES_DB_POOL_TIMEOUT
# seconds, then fails with `psycopg_pool.PoolTimeout` (an OperationalError): the HTTP API answers
# that request 503 `database_busy`. Sizing for N processes: docs/deploy.md, "Scale-out".
HERMES_DB_POOL_MAX = env("HERMES_DB_POOL_MAX")
HERMES_DB_POOL_TIMEOUT = env("HERMES_DB_POOL_TIMEOUT")
# Connections kept open while idle, so the first requests after a quiet spell do not all reconnect.
HERMES_DB_POOL_MIN = min(2, HERMES_DB_POOL_MAX)

_database_url = env("DATABASE_URL")
if _database_url:
    # Health checks: a pooled connection is tested as it is handed out, so a PostgreSQL restart
    # costs a reconnect instead of a failed request.
    DATABASES = {"default": dj_database_url.parse(_database_url, conn_max_age=0, conn_health_checks=True)}
    if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
        DATABASES["default"].setdefault("OPTIONS", {}).update(_SQLITE_OPTIONS)
    elif DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
        from common.database import RecordingConnection

        DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
            # Remembers why the latest connection attempt failed: "database down" is not "busy".
            "connection_class": RecordingConnection,
            "min_size": HERMES_DB_POOL_MIN,
            "max_size": HERMES_DB_POOL_MAX,
            "timeout": HERMES_DB_POOL_TIMEOUT,
        }
        # Parameters travel apart from the statement (psycopg 3's own way) instead of being quoted
        # into it by psycopg in Python, which costs CPU on every statement of a turn.
        # Prepared statements stay off (Django's default), so a transaction pooler such as
        # PgBouncer still works in front of PostgreSQL.
        DATABASES["default"]["OPTIONS"]["server_side_binding"] = True
else:
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": str(DATA_DIR / "hermes.sqlite3"),
            "OPTIONS": _SQLITE_OPTIONS,
        }
    }

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Channel layer ---------------------------------------------------------------------------------

_redis_url = env("REDIS_URL")
if _redis_url:
    # Imported only here: redis-py and channels-redis are slow to import, and most processes need neither.
    from hermes_site.channel_layers import redis_channel_layer

    CHANNEL_LAYERS = {"default": redis_channel_layer(_redis_url, prefix=env("HERMES_CHANNEL_PREFIX"))}
else:
    # The in-memory layer silently drops messages past a channel's capacity; turn events are
    # coalesced, and the higher capacity is a second line of defence.
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels.layers.InMemoryChannelLayer",
            "CONFIG": {"capacity": 1000},
        }
    }

# --- Static files ----------------------------------------------------------------------------------

# STATIC_URL is set under "HTTP API": it carries the URL prefix.
STATIC_ROOT = BASE_DIR / "staticfiles"
STATICFILES_DIRS = [BASE_DIR / "static"]
# WhiteNoise serves STATIC_ROOT too and warns when it is missing (before any collectstatic).
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
# Hashed, compressed file names need `collectstatic` first (the container image runs it at build and
# sets HERMES_STATIC_MANIFEST); development and tests serve the files as they are.
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": (
            "whitenoise.storage.CompressedManifestStaticFilesStorage"
            if env("HERMES_STATIC_MANIFEST")
            else "django.contrib.staticfiles.storage.StaticFilesStorage"
        )
    },
}
# Serve straight from the app directories when nobody ran collectstatic (development, tests).
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG

# --- Internationalisation --------------------------------------------------------------------------

LANGUAGE_CODE = "en-us"
TIME_ZONE = env("HERMES_TIME_ZONE")
USE_I18N = False
USE_TZ = True

# --- Logging ---------------------------------------------------------------------------------------

# Readable text by default, one JSON object per line with HERMES_LOG_FORMAT=json. Every line
# logged during a turn carries its correlation id and session id; secrets are redacted on every
# handler (common/logs.py).
HERMES_LOG_FORMAT = env("HERMES_LOG_FORMAT")
HERMES_LOG_LEVEL = env("HERMES_LOG_LEVEL").strip().upper() or "INFO"
# Whether the operator chose the level: `ask` keeps its terminal to the answer and tool lines
# (WARNING and above) unless they did, or passed `-v 2`.
HERMES_LOG_LEVEL_CHOSEN = env_set("HERMES_LOG_LEVEL")
LOGGING = logging_config(log_format=HERMES_LOG_FORMAT, level=HERMES_LOG_LEVEL)

# --- Hermes: the model -----------------------------------------------------------------------------

ANTHROPIC_API_KEY = env("ANTHROPIC_API_KEY")
ANTHROPIC_BASE_URL = env("ANTHROPIC_BASE_URL")
HERMES_MODEL = env("HERMES_MODEL")
# The models an operator may pick for a session (control room, `/chat`'s `model`, `ask --model`).
# HERMES_MODEL is always among them: it is what a session without a choice uses.
HERMES_MODELS = tuple(
    dict.fromkeys([HERMES_MODEL, *(name.strip() for name in env("HERMES_MODELS").split(",") if name.strip())])
)
# Thinking: `adaptive` lets the model decide when and how much to think (a budget derived from the
# effort on models that predate adaptive thinking); `off` sends no thinking setting, so the model's
# default applies (no thinking, except on models that always think).
HERMES_THINKING = env("HERMES_THINKING")
HERMES_EFFORT = env("HERMES_EFFORT")
HERMES_SOUL_PATH = env("HERMES_SOUL_PATH", str(BASE_DIR / "agent" / "SOUL.md"))

# --- Hermes: the context window (agent/conversation/context.py) ----------------------------------------

# Tokens of the model's context window; 0 takes the model family's (200,000 for Claude models). A
# compatible server with a smaller window is learned from its first "prompt is too long" refusal.
HERMES_CONTEXT_WINDOW = env("HERMES_CONTEXT_WINDOW")
# The share of the window a request may fill before the session is compacted first.
HERMES_COMPACT_AT = env("HERMES_COMPACT_AT")
if HERMES_COMPACT_AT > 0.95:
    raise ImproperlyConfigured(f"HERMES_COMPACT_AT must be at most 0.95, not {HERMES_COMPACT_AT}")
# The latest whole turns kept verbatim for the model when older ones are summarised.
HERMES_COMPACT_KEEP_TURNS = 2
# Ask the API's token counting (`/v1/messages/count_tokens`) when a session nears the limit;
# a server without it is asked once and then estimated for.
HERMES_TOKEN_COUNTING = True

# --- Hermes: budgets of one turn -------------------------------------------------------------------

HERMES_MAX_ITERATIONS = env("HERMES_MAX_ITERATIONS")
# Thinking counts toward it: room for the model to think and still answer in one response.
HERMES_MAX_TOKENS = env("HERMES_MAX_TOKENS")
HERMES_TURN_TOKEN_BUDGET = env("HERMES_TURN_TOKEN_BUDGET")
HERMES_TURN_TIMEOUT = env("HERMES_TURN_TIMEOUT")
# How long an MCP server's question (elicitation) waits for an operator before Hermes cancels it.
# The wait also ends before the tool call's own `timeout` (the call would fail anyway).
HERMES_ELICITATION_TIMEOUT = 300.0
HERMES_TOOL_RESULT_MAX_CHARS = env("HERMES_TOOL_RESULT_MAX_CHARS")
# What the ledger stores of one tool result: its text, once, up to this many characters (head and
# tail, with a marker saying how much was cut). 2 million is 100 times what the model is shown, more
# than any log or snapshot an operator reads in a browser, and keeps a row (and the memory a turn
# needs to write it) in single megabytes however much a tool answers.
HERMES_LEDGER_RESULT_MAX_CHARS = 2_000_000

# Seconds a model call may go without a stream event (pings do not count); the turn's own time
# limit bounds every call overall.
HERMES_LLM_TIMEOUT = env("HERMES_LLM_TIMEOUT")
# Retries of a model call that failed before it said anything (drop, overload, 5xx), within the turn's time.
HERMES_LLM_RETRIES = 2
HERMES_MAX_MESSAGE_CHARS = env("HERMES_MAX_MESSAGE_CHARS")
HERMES_RECALL_TOKENS = env("HERMES_RECALL_TOKENS")
# A running turn whose heartbeat is older than this belongs to a process that died.
HERMES_TURN_STALE_SECONDS = env("HERMES_TURN_STALE_SECONDS")

# --- Hermes: tools (MCP) ---------------------------------------------------------------------------

HERMES_MCP_CONFIG = env("HERMES_MCP_CONFIG")
OIKOS_MCP_URL = env("OIKOS_MCP_URL")
OIKOS_MCP_TOKEN = env("OIKOS_MCP_TOKEN")
HERMES_MCP_TIMEOUT = env("HERMES_MCP_TIMEOUT")
# The MCP server that is Oikos: the only one whose `request_execution` raises approval cards, and the
# one held to the Oikos tool allowlist (see agent.tools.policy). Without a config file it is the
# server made from OIKOS_MCP_URL.
HERMES_OIKOS_SERVER = env("HERMES_OIKOS_SERVER").strip() or "oikos"
# Globs added to every MCP server's denylist of decision tools (comma-separated, any spelling:
# `*grant*approval*` also matches `grantApproval`); the built-in patterns always apply.
HERMES_MCP_TOOLS_DENY = env("HERMES_MCP_TOOLS_DENY")

# --- Oikos REST (control room, approvals, events) --------------------------------------------------

# The REST side of Oikos (health, approvals, executions, the event stream). When unset it is derived
# from OIKOS_MCP_URL: the same server, `/mcp` replaced by `/api/v1` (see oikos.client).
OIKOS_API_URL = env("OIKOS_API_URL")
# The control room's own bearer (an operator-side service identity, never the agent's MCP token).
OIKOS_API_TOKEN = env("OIKOS_API_TOKEN")
# Oikos's own ledger page; `{correlation_id}` in it is replaced, otherwise `?correlation_id=` is added.
OIKOS_LEDGER_URL = env("OIKOS_LEDGER_URL")
OIKOS_API_TIMEOUT = 10.0
# Approval cards: how long what Oikos said about a card's target (blast radius, recent executions)
# is reused before asking again, and how long one fetch may take before the card says "unavailable".
HERMES_CARD_CONTEXT_TTL = 60.0
HERMES_CARD_CONTEXT_TIMEOUT = 2.0

# --- HTTP API --------------------------------------------------------------------------------------

# Behind a proxy that maps e.g. `/agent/*` to Hermes (stripping the prefix or not), every link
# Hermes builds must carry the prefix while routes still match the path without it.
HERMES_URL_PREFIX = env("HERMES_URL_PREFIX")
FORCE_SCRIPT_NAME = HERMES_URL_PREFIX or None
STATIC_URL = f"{HERMES_URL_PREFIX}/static/"
# Request bodies and websocket messages larger than this are refused (413, close 4009) at the ASGI edge.
HERMES_MAX_REQUEST_BYTES = env("HERMES_MAX_REQUEST_BYTES")
# A `/chat` stream silent for this long gets an SSE comment, so proxies keep it open during slow tools.
HERMES_SSE_KEEPALIVE = env("HERMES_SSE_KEEPALIVE")

# --- Access control --------------------------------------------------------------------------------

# Who is asking. `local`: everyone on the allowed networks acts as HERMES_LOCAL_OPERATOR (development);
# `proxy`: the operator named by the sign-in proxy's X-Authentik-* headers, believed only from
# HERMES_TRUSTED_PROXY_CIDRS; `django`: Django's own login. HERMES_TRUSTED_PROXY=true selects `proxy`.
HERMES_AUTH = env("HERMES_AUTH")
if env("HERMES_TRUSTED_PROXY"):
    if env_set("HERMES_AUTH") and HERMES_AUTH != "proxy":
        raise ImproperlyConfigured(f"HERMES_TRUSTED_PROXY=true selects HERMES_AUTH=proxy, not {HERMES_AUTH!r}")
    HERMES_AUTH = "proxy"
HERMES_LOCAL_OPERATOR = env("HERMES_LOCAL_OPERATOR").strip()
if not re.fullmatch(r"[\w.@+-]{1,150}", HERMES_LOCAL_OPERATOR):
    raise ImproperlyConfigured(
        f"HERMES_LOCAL_OPERATOR must be a user name (letters, digits and . @ + - _), not {HERMES_LOCAL_OPERATOR!r}"
    )
HERMES_TRUSTED_PROXY_CIDRS = env("HERMES_TRUSTED_PROXY_CIDRS")
if HERMES_AUTH == "proxy" and not HERMES_TRUSTED_PROXY_CIDRS:
    raise ImproperlyConfigured(
        "HERMES_AUTH=proxy needs HERMES_TRUSTED_PROXY_CIDRS: the address(es) of the proxy whose X-Authentik-* "
        "headers Hermes may believe, e.g. 172.20.0.0/16 for a compose network"
    )
# Proxy users in any of these groups (X-Authentik-Groups, `|`-separated) get the admin.
HERMES_STAFF_GROUPS = env("HERMES_STAFF_GROUPS")
# mesh_only: connections from anywhere else are refused before anything runs. The trusted proxies
# are always allowed as well.
HERMES_ALLOWED_CIDRS = env("HERMES_ALLOWED_CIDRS")
# The address Daphne is told to listen on (`daphne -b $HERMES_BIND`): Django cannot see the socket,
# and `local` mode beyond loopback deserves a loud warning at start-up.
HERMES_BIND = env("HERMES_BIND").strip()

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "controlroom:home"

# Browser hardening. Only the trusted proxy may say the browser used HTTPS: the ASGI edge strips
# X-Forwarded-Proto from every other peer, and without trusted proxies Django ignores the header.
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if HERMES_TRUSTED_PROXY_CIDRS else None
SESSION_COOKIE_SECURE = PRODUCTION
CSRF_COOKIE_SECURE = PRODUCTION
SECURE_SSL_REDIRECT = PRODUCTION
# Container health checks and Prometheus talk plain HTTP to the process itself (with or without
# the URL prefix, as a proxy may forward it).
_PREFIX_PATTERN = f"(?:{re.escape(HERMES_URL_PREFIX.strip('/'))}/)?" if HERMES_URL_PREFIX else ""
SECURE_REDIRECT_EXEMPT = [rf"^{_PREFIX_PATTERN}healthz$", rf"^{_PREFIX_PATTERN}metrics$"]
SECURE_HSTS_SECONDS = env("HERMES_HSTS_SECONDS", 31_536_000 if PRODUCTION else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = SECURE_HSTS_SECONDS > 0
# `preload` only permits submitting the domain to browsers' preload lists; it submits nothing.
SECURE_HSTS_PRELOAD = SECURE_HSTS_SECONDS > 0
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
# Hermes usually shares a host with Oikos behind one proxy: cookies of its own name avoid collisions.
SESSION_COOKIE_NAME = "hermes_sessionid"
CSRF_COOKIE_NAME = "hermes_csrftoken"
# Django's 403 page, with the reason noted on the request (refused approval decisions are recorded).
CSRF_FAILURE_VIEW = "access.refusals.csrf_refused"
# Our own static files and nothing else: no inline script, no eval, no third-party origin, no framing.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)

# --- Agent interop (MCP server, A2A) ---------------------------------------------------------------

# Serve the A2A endpoints (A2A 1.0 and the GarraIA dialect) from the ASGI app.
HERMES_A2A_SERVE = env("HERMES_A2A_SERVE")
HERMES_A2A_NAME = env("HERMES_A2A_NAME")
# The base URL peers reach this Hermes at, for the agent cards (e.g. behind a proxy); by default
# it is built from each card request's Host (one of ALLOWED_HOSTS: the edge refuses any other).
HERMES_A2A_PUBLIC_URL = env("HERMES_A2A_PUBLIC_URL")
# Stock GarraIA sends no Authorization header. When true, the GarraIA-dialect routes accept calls
# without a token, but only from a loopback address, as the peer named below.
HERMES_A2A_GARRAIA_LOOPBACK_NO_TOKEN = env("HERMES_A2A_GARRAIA_LOOPBACK_NO_TOKEN")
HERMES_A2A_GARRAIA_LOOPBACK_PEER = env("HERMES_A2A_GARRAIA_LOOPBACK_PEER")
HERMES_A2A_MAX_BODY_BYTES = env("HERMES_A2A_MAX_BODY_BYTES")
# Turns one inbound conversation (a GarraIA task id, an A2A contextId) may run.
HERMES_A2A_SERVER_MAX_TURNS = env("HERMES_A2A_SERVER_MAX_TURNS")
# Wall-clock limit of a turn a peer asked for; GarraIA's client gives up after 120 s.
HERMES_A2A_SERVER_TURN_TIMEOUT = env("HERMES_A2A_SERVER_TURN_TIMEOUT")
# Rate windows: turns one peer may start here, and messages Hermes may send one peer, per window.
HERMES_A2A_RATE_WINDOW = env("HERMES_A2A_RATE_WINDOW")
HERMES_A2A_RATE_LIMIT = env("HERMES_A2A_RATE_LIMIT")
HERMES_A2A_SEND_RATE_LIMIT = 10
# How much of one peer the interop tables keep: its newest messages each way (exchanges) and its
# newest A2A tasks. Older finished ones are deleted as new ones arrive, so a peer within its rate
# limit still cannot grow the database without bound (the Hermes sessions keep the transcript).
HERMES_A2A_PEER_KEEP = 500
# The peers Hermes may talk to (`a2a_send`, `a2a_talk`); without it, `a2a_send` is not offered.
HERMES_A2A_PEERS = env("HERMES_A2A_PEERS")

# --- Observability ---------------------------------------------------------------------------------

# Names of further environment variables whose values are secrets, comma-separated (e.g.
# "GARRA_TOKEN,NOTES_API_KEY"): they are redacted from logs like the API key and MCP tokens.
HERMES_REDACT = env("HERMES_REDACT")

# --- Hermes: daily token budgets (agent/budget.py) -------------------------------------------------

# Tokens (input + output + cache read + cache write) all turns may spend per day; 0 = unlimited.
# Past it, interactive turns are refused before anything is stored or sent to the model.
HERMES_DAILY_TOKEN_BUDGET = env("HERMES_DAILY_TOKEN_BUDGET")
# Tokens investigations (sessions of origin `signal`) may spend per day; 0 = unlimited. They count
# against the daily budget above too.
HERMES_INVESTIGATION_DAILY_TOKEN_BUDGET = env("HERMES_INVESTIGATION_DAILY_TOKEN_BUDGET")
# The share of the daily budget kept back for operators' questions and investigations of critical
# signals: peers and other investigations stop before it (agent/budget.py `turn_admit`).
HERMES_BUDGET_RESERVE_SHARE = env("HERMES_BUDGET_RESERVE_SHARE")
# The share of the daily budget one peer (A2A or `mcp_serve`) may spend per day, unless its entry in
# the peers file sets `budget_share`.
HERMES_PEER_BUDGET_SHARE = env("HERMES_PEER_BUDGET_SHARE")
if HERMES_BUDGET_RESERVE_SHARE > 1 or HERMES_PEER_BUDGET_SHARE > 1:
    raise ImproperlyConfigured(
        "HERMES_BUDGET_RESERVE_SHARE and HERMES_PEER_BUDGET_SHARE are shares of the daily budget, between 0 and 1"
    )
# The time zone whose midnight starts a budget day (an IANA name); UTC by default.
HERMES_BUDGET_TIMEZONE = env("HERMES_BUDGET_TIMEZONE").strip() or "UTC"
# Per-model prices in USD per million tokens, JSON, merged over the bundled defaults: keys are model
# ids or id prefixes (the longest match wins), values {"input", "output", "cache_read", "cache_write"}.
HERMES_MODEL_PRICES = env("HERMES_MODEL_PRICES")
try:
    zoneinfo.ZoneInfo(HERMES_BUDGET_TIMEZONE)
except (zoneinfo.ZoneInfoNotFoundError, ValueError):
    raise ImproperlyConfigured(
        f"HERMES_BUDGET_TIMEZONE must be an IANA time zone such as UTC or Europe/Lisbon, not {HERMES_BUDGET_TIMEZONE!r}"
    ) from None

# --- Proactive investigations (`manage.py watch`, watch/) -----------------------------------------

# Which Oikos events open an investigation: a JSON file with any of the keys kinds, min_severity,
# include, exclude, cooldown_seconds, hourly_cap; an absent key keeps its default (watch/policy.py,
# read when the watcher starts).
HERMES_WATCH_POLICY_FILE = env("HERMES_WATCH_POLICY_FILE")
# A watcher starting on an empty database (no stored position) and Oikos's backlog: `skip` records
# the events raised before it started without investigating them (start from now); `replay`
# investigates the recent ones (watch/watcher.py).
HERMES_WATCH_BACKLOG = env("HERMES_WATCH_BACKLOG")
# Investigations are read-only unless this is true: then `request_execution` is offered, and
# what it requests still waits for an operator's approval in Oikos.
HERMES_INVESTIGATIONS_MAY_PROPOSE = env("HERMES_INVESTIGATIONS_MAY_PROPOSE")

# --- Matrix bridge (`manage.py matrix_bridge`, matrix/) ---------------------------------------------

# The homeserver's client API base URL (https://matrix.example.net) and the bot's account: its user
# id and an access token (docs/matrix.md says how to get one). All three, or the bridge is off.
HERMES_MATRIX_HOMESERVER = env("HERMES_MATRIX_HOMESERVER").rstrip("/")
HERMES_MATRIX_USER_ID = env("HERMES_MATRIX_USER_ID")
HERMES_MATRIX_ACCESS_TOKEN = env("HERMES_MATRIX_ACCESS_TOKEN")
# The rooms the bridge serves, by room id (`!abc:example.net`); every other room is ignored.
HERMES_MATRIX_ROOMS = env("HERMES_MATRIX_ROOMS")
# Who may ask and decide: `@alice:example.net=alice,@bob:example.net=bob` (Matrix user = operator name).
HERMES_MATRIX_OPERATORS = env("HERMES_MATRIX_OPERATORS")
# Where the watcher's investigations are posted, each as a thread operators reply in (a room id,
# served like those of HERMES_MATRIX_ROOMS); empty: escalations stay in the control room.
HERMES_MATRIX_ESCALATION_ROOM = env("HERMES_MATRIX_ESCALATION_ROOM")
# At most one edit of a streaming answer per this many seconds (the homeserver's rate limit still rules).
HERMES_MATRIX_EDIT_SECONDS = env("HERMES_MATRIX_EDIT_SECONDS")
# Where operators open Hermes (scheme and host), so a scheduled run posted in Matrix links to its
# session in the control room; empty: the bridge does not know, and posts no link.
HERMES_MATRIX_CONTROLROOM_URL = env("HERMES_MATRIX_CONTROLROOM_URL").rstrip("/")

# --- Evals (`manage.py eval`, evals/) --------------------------------------------------------------

# Where eval case files are read from and where the control room's "Save as eval case" writes a new
# one for review; empty: the repository's evals/cases/ (evals/saving.py `cases_dir`).
HERMES_EVALS_CASES_DIR = env("HERMES_EVALS_CASES_DIR")
