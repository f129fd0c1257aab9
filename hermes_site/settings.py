"""Hermes settings: one module, driven entirely by the environment.

Embedded defaults (SQLite, in-memory channel layer, local operator) need no configuration at all;
`DATABASE_URL` and `REDIS_URL` switch to PostgreSQL and Redis for scale-out. The README's
configuration table lists every variable read here.
"""

from __future__ import annotations

from pathlib import Path

import dj_database_url

from hermes_site.environment import env_bool, env_float, env_int, env_list, env_str

BASE_DIR = Path(__file__).resolve().parent.parent
DATA_DIR = Path(env_str("HERMES_DATA_DIR", str(BASE_DIR / "var")))

# --- Django core -----------------------------------------------------------------------------------

DEBUG = env_bool("HERMES_DEBUG", False)
# A fixed development key keeps sessions valid across restarts on a laptop; production settings
# (documented in the README) must set HERMES_SECRET_KEY, and `check --deploy` says so otherwise.
SECRET_KEY = env_str("HERMES_SECRET_KEY") or "django-insecure-hermes-development-key-change-me"
ALLOWED_HOSTS = env_list("HERMES_ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])

INSTALLED_APPS = [
    # Daphne first: its runserver serves HTTP and websockets from one ASGI process.
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "django_htmx",
    "agent",
    "controlroom",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
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
    "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
}

_database_url = env_str("DATABASE_URL")
if _database_url:
    DATABASES = {"default": dj_database_url.parse(_database_url, conn_max_age=0)}
    if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
        DATABASES["default"].setdefault("OPTIONS", {}).update(_SQLITE_OPTIONS)
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

_redis_url = env_str("REDIS_URL")
if _redis_url:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {
                "hosts": [_redis_url],
                "prefix": env_str("HERMES_CHANNEL_PREFIX", "hermes"),
                "capacity": 1000,
            },
        }
    }
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

STATIC_URL = "static/"
STATIC_ROOT = Path(env_str("HERMES_STATIC_ROOT", str(BASE_DIR / "staticfiles")))
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
            if env_bool("HERMES_STATIC_MANIFEST", False)
            else "django.contrib.staticfiles.storage.StaticFilesStorage"
        )
    },
}
# Serve straight from the app directories when nobody ran collectstatic (development, tests).
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG

# --- Internationalisation --------------------------------------------------------------------------

LANGUAGE_CODE = "en-us"
TIME_ZONE = env_str("HERMES_TIME_ZONE", "UTC")
USE_I18N = False
USE_TZ = True

# --- Logging ---------------------------------------------------------------------------------------

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "text": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
    },
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": "text"},
    },
    "root": {"handlers": ["console"], "level": env_str("HERMES_LOG_LEVEL", "INFO")},
    "loggers": {
        "httpx2": {"level": "WARNING"},
        "mcp": {"level": "WARNING"},
    },
}

# --- Hermes: the model -----------------------------------------------------------------------------

ANTHROPIC_API_KEY = env_str("ANTHROPIC_API_KEY")
ANTHROPIC_BASE_URL = env_str("ANTHROPIC_BASE_URL")
HERMES_MODEL = env_str("HERMES_MODEL", "claude-sonnet-5")
HERMES_SOUL_PATH = env_str("HERMES_SOUL_PATH", str(BASE_DIR / "agent" / "SOUL.md"))

# --- Hermes: budgets of one turn -------------------------------------------------------------------

HERMES_MAX_ITERATIONS = env_int("HERMES_MAX_ITERATIONS", 15, minimum=1)
HERMES_MAX_TOKENS = env_int("HERMES_MAX_TOKENS", 4096, minimum=1)
HERMES_TURN_TOKEN_BUDGET = env_int("HERMES_TURN_TOKEN_BUDGET", 400_000, minimum=1)
HERMES_TURN_TIMEOUT = env_float("HERMES_TURN_TIMEOUT", 600.0, minimum=1.0)
HERMES_TOOL_RESULT_MAX_CHARS = env_int("HERMES_TOOL_RESULT_MAX_CHARS", 20_000, minimum=200)
HERMES_LLM_TIMEOUT = env_float("HERMES_LLM_TIMEOUT", 120.0, minimum=1.0)
HERMES_MAX_MESSAGE_CHARS = env_int("HERMES_MAX_MESSAGE_CHARS", 32_000, minimum=1)
# A running turn whose heartbeat is older than this belongs to a process that died.
HERMES_TURN_STALE_SECONDS = env_float("HERMES_TURN_STALE_SECONDS", 90.0, minimum=1.0)

# --- Hermes: tools (MCP) ---------------------------------------------------------------------------

HERMES_MCP_CONFIG = env_str("HERMES_MCP_CONFIG")
OIKOS_MCP_URL = env_str("OIKOS_MCP_URL")
OIKOS_MCP_TOKEN = env_str("OIKOS_MCP_TOKEN")
HERMES_MCP_TIMEOUT = env_float("HERMES_MCP_TIMEOUT", 180.0, minimum=1.0)

# --- Oikos REST (control room, approvals, events) --------------------------------------------------

# The REST side of Oikos (health, approvals, executions, the event stream). When unset it is derived
# from OIKOS_MCP_URL: the same server, `/mcp` replaced by `/api/v1` (see controlroom.oikos).
OIKOS_API_URL = env_str("OIKOS_API_URL")
# The control room's own bearer (an operator-side service identity, never the agent's MCP token).
OIKOS_API_TOKEN = env_str("OIKOS_API_TOKEN")
# Oikos's own ledger page; `{correlation_id}` in it is replaced, otherwise `?correlation_id=` is added.
OIKOS_LEDGER_URL = env_str("OIKOS_LEDGER_URL")
OIKOS_API_TIMEOUT = env_float("OIKOS_API_TIMEOUT", 10.0, minimum=0.5)

# --- HTTP API --------------------------------------------------------------------------------------

# --- Access control --------------------------------------------------------------------------------

# Who the operator is while access control is local: every decision and every turn from the control
# room is recorded under this name (controlroom.identity is the one place that reads it).
HERMES_LOCAL_OPERATOR = env_str("HERMES_LOCAL_OPERATOR", "operator")

# --- Agent interop (MCP server, A2A) ---------------------------------------------------------------

# --- Observability ---------------------------------------------------------------------------------
