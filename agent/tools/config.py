"""Which MCP servers Hermes talks to: the `mcpServers` file, or the Oikos server from settings.

The file has the shape Claude Desktop and Claude Code use::

    {"mcpServers": {
        "oikos": {"type": "http", "url": "${OIKOS_MCP_URL}",
                  "headers": {"Authorization": "Bearer ${OIKOS_MCP_TOKEN}"},
                  "timeout": 60, "tools": {"exclude": ["request_execution"]}},
        "garraia": {"command": "garra", "args": ["mcp-server"],
                    "hermes": {"envelope": "garra.ask.v1", "peer": "garraia",
                               "arguments": {"provider": "anthropic", "model": "claude-haiku-4-5"}}}
    }}

`"tools"` holds the server's tool filters and policy: `include`/`exclude` (exact names or fnmatch
patterns) narrow what is offered; `deny` adds globs of tools never offered (matched in any
spelling, see `agent.tools.policy`); `allow` — on the Oikos server only — names tools outside the
known Oikos surface the operator vouches for. Which server is Oikos is the setting
`HERMES_OIKOS_SERVER` (default `oikos`): only its `request_execution` raises approval cards.

The optional `"hermes"` object holds what only Hermes reads: `peer` (the peer agent behind the
server, for the depth guard; the server's name by default), `envelope` (a registered result
envelope, see `agent.tools.envelopes`), `arguments` (values always sent with every call of the
server's tools, overriding the model's and hidden from the schema it sees), `protocol` (the MCP
revision to speak, `auto` by default: see `agent.tools.protocol`) and `oauth` (how Hermes
authorizes itself to an HTTP server with OAuth: see `agent.tools.oauth.settings`).

`${VAR}` and `${VAR:-default}` expand in every string value. A variable that is unset and has no
default is a configuration error naming it: sending the literal `${OIKOS_MCP_TOKEN}` as a token
would fail far from the cause.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

from django.conf import settings

from agent.tools.envelopes import envelope_get, envelope_names
from agent.tools.oauth.settings import OAuthConfig, OAuthConfigError, oauth_config_parse
from agent.tools.policy import ToolPolicy, tool_withheld_report
from agent.tools.protocol import AUTO, PROTOCOL_CHOICES
from common.redaction import MIN_SECRET_LENGTH

logger = logging.getLogger(__name__)

Transport = Literal["http", "stdio"]

_TRANSPORT_NAMES: dict[str, Transport] = {
    "http": "http",
    "streamable-http": "http",
    "streamable_http": "http",
    "streamablehttp": "http",
    "stdio": "stdio",
}

_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")

# Authorization schemes whose credential part is worth redacting on its own, since a tool may
# echo the bare token without the scheme.
_AUTH_SCHEMES = ("bearer ", "basic ", "token ")

# A variable named like this holds a secret wherever it is used (a `--token` argument, a URL).
_SECRET_VARIABLE = re.compile(r"TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|PRIVATE_?KEY|CREDENTIAL", re.IGNORECASE)
# A stdio server's own environment variable named like this holds a secret (broader: the name is
# all there is to go by).
_SECRET_ENV_NAME = re.compile(r"TOKEN|SECRET|PASS|KEY|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE|CERT", re.IGNORECASE)
# Headers that describe a request and never carry a credential.
_DESCRIPTIVE_HEADERS = frozenset(
    {"accept", "accept-encoding", "accept-language", "content-type", "user-agent", "mcp-protocol-version"}
)


class MCPConfigError(Exception):
    """The MCP server configuration cannot be used; the message says where and why."""


@dataclass(frozen=True)
class ServerConfig:
    """One MCP server as configured. Header and env values are secrets and stay out of `repr`."""

    name: str
    transport: Transport
    timeout: float
    url: str = ""
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    command: str = ""
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict, repr=False)
    cwd: str | None = None
    include: tuple[str, ...] | None = None
    exclude: tuple[str, ...] = ()
    # Which tools are never offered, whatever include/exclude say (see `agent.tools.policy`).
    policy: ToolPolicy = field(default_factory=ToolPolicy)
    # Values of secret-named variables (`${OIKOS_TOKEN}`), wherever they were expanded.
    secret_expansions: frozenset[str] = field(default=frozenset(), repr=False)
    # The `"hermes"` options (see the module docstring).
    peer: str | None = None
    envelope: str | None = None
    fixed_arguments: Mapping[str, Any] = field(default_factory=dict)
    protocol: str = AUTO
    # How Hermes authorizes itself to the server with OAuth (`"hermes": {"oauth": {...}}`), if it does.
    oauth: OAuthConfig | None = None

    @property
    def oikos(self) -> bool:
        """Whether this is the Oikos server: the only one whose `request_execution` raises approvals."""
        return self.policy.oikos

    @property
    def peer_name(self) -> str:
        """The peer agent this server speaks for, as the depth guard compares it."""
        return self.peer or self.name

    @property
    def target(self) -> str:
        """Where the server is, for operators and error messages: the URL without credentials or
        query, or the command without its arguments (either may carry a token)."""
        if self.transport == "stdio":
            return self.command
        parts = urlsplit(self.url)
        host = parts.netloc.rpartition("@")[2]
        return urlunsplit((parts.scheme, host, parts.path, "", ""))

    def allows(self, tool: str, *, read_only: bool = False) -> bool:
        """Whether Hermes may offer `tool`: never one the server's policy withholds (denied, or an
        unknown tool of the Oikos server), otherwise what the include/exclude filters let through
        (exact names or fnmatch patterns)."""
        reason = self.policy.withheld(tool, read_only=read_only)
        if reason is not None:
            tool_withheld_report(self.name, tool, reason)
            return False
        if self.include is not None and not any(fnmatchcase(tool, pattern) for pattern in self.include):
            return False
        return not any(fnmatchcase(tool, pattern) for pattern in self.exclude)

    def secret_values(self) -> frozenset[str]:
        """Configured values that must never reach the model, the UI, logs or the database.

        Every header value but the plainly descriptive ones (`Accept`, `Content-Type`, ...), since
        servers take credentials under any header name; the env values of secret-named variables
        (`GARRA_API_KEY`, not `NOTES_DIR`: redacting a path from every tool result would mangle
        output and protect nothing); and values of secret-named `${VARIABLES}` wherever used.
        """
        secrets: set[str] = set(self.secret_expansions)
        if self.oauth is not None:
            secrets |= self.oauth.secret_values()
        values = [value for name, value in self.headers.items() if name.lower() not in _DESCRIPTIVE_HEADERS]
        values += [value for name, value in self.env.items() if _SECRET_ENV_NAME.search(name)]
        for value in values:
            secrets.add(value)
            if value.lower().startswith(_AUTH_SCHEMES):
                secrets.add(value.split(" ", 1)[1].strip())
        return frozenset(secret for secret in secrets if len(secret) >= MIN_SECRET_LENGTH)


def oikos_server_name() -> str:
    """The name of the MCP server that is Oikos (`HERMES_OIKOS_SERVER`, default `oikos`)."""
    return str(settings.HERMES_OIKOS_SERVER)


def mcp_servers_from_settings() -> list[ServerConfig]:
    """The servers Django settings describe: `HERMES_MCP_CONFIG`, else `OIKOS_MCP_URL`, else none.

    Raises:
        MCPConfigError: the file is missing, malformed, or names an unset variable.
    """
    timeout = float(settings.HERMES_MCP_TIMEOUT)
    deny = tuple(settings.HERMES_MCP_TOOLS_DENY)
    oikos = oikos_server_name()
    if settings.HERMES_MCP_CONFIG:
        path = Path(settings.HERMES_MCP_CONFIG)
        servers = mcp_config_load(path, default_timeout=timeout, oikos_server=oikos, deny=deny)
        if servers and not any(server.oikos for server in servers):
            logger.warning(
                "%s configures no MCP server named %r (HERMES_OIKOS_SERVER): no tool call will raise an approval",
                path,
                oikos,
            )
        return servers
    if settings.OIKOS_MCP_URL:
        headers = {"Authorization": f"Bearer {settings.OIKOS_MCP_TOKEN}"} if settings.OIKOS_MCP_TOKEN else {}
        return [
            ServerConfig(
                name=oikos,
                transport="http",
                timeout=timeout,
                url=settings.OIKOS_MCP_URL,
                headers=headers,
                policy=ToolPolicy(oikos=True, deny=deny),
            )
        ]
    return []


def mcp_config_load(
    path: Path,
    *,
    default_timeout: float,
    environ: Mapping[str, str] | None = None,
    oikos_server: str = "oikos",
    deny: Sequence[str] = (),
) -> list[ServerConfig]:
    """Read an `mcpServers` file. Raises `MCPConfigError` naming the file on any problem."""
    document = config_file_read(path, kind="MCP config file", setting="HERMES_MCP_CONFIG", error=MCPConfigError)
    return mcp_config_parse(
        document,
        source=str(path),
        default_timeout=default_timeout,
        environ=environ or os.environ,
        oikos_server=oikos_server,
        deny=deny,
    )


def mcp_config_parse(
    document: Any,
    *,
    source: str,
    default_timeout: float,
    environ: Mapping[str, str],
    oikos_server: str = "oikos",
    deny: Sequence[str] = (),
) -> list[ServerConfig]:
    """Turn a parsed `mcpServers` document into server configs, expanding `${VAR}` from `environ`.

    The server named `oikos_server` is held to the Oikos allowlist; `deny` (globs) is added to
    every server's denylist.
    """
    if not isinstance(document, dict) or not isinstance(document.get("mcpServers"), dict):
        raise MCPConfigError(f'{source}: expected a JSON object with an object under "mcpServers"')
    servers = []
    for name, entry in document["mcpServers"].items():
        where = f"{source}: server {name!r}"
        if not name:
            raise MCPConfigError(f"{source}: a server name must not be empty")
        if not isinstance(entry, dict):
            raise MCPConfigError(f"{where}: expected an object, got {type(entry).__name__}")
        if _optional(entry, "disabled", bool, where, default=False):
            continue
        servers.append(
            _server_parse(name, entry, where, default_timeout, environ, oikos=name == oikos_server, deny=tuple(deny))
        )
    return servers


def _server_parse(
    name: str,
    entry: dict[str, Any],
    where: str,
    default_timeout: float,
    environ: Mapping[str, str],
    *,
    oikos: bool,
    deny: tuple[str, ...],
) -> ServerConfig:
    secret_expansions: set[str] = set()
    entry = {key: config_value_expand(value, key, where, environ, secret_expansions) for key, value in entry.items()}
    transport = _transport(entry, where)
    timeout = _optional(entry, "timeout", (int, float), where, default=default_timeout)
    if isinstance(timeout, bool) or timeout <= 0:
        raise MCPConfigError(f'{where}: "timeout" must be a positive number of seconds')
    lists = _tool_lists(entry, where)
    if lists["allow"] and not oikos:
        raise MCPConfigError(
            f'{where}: "tools.allow" is only for the Oikos server (HERMES_OIKOS_SERVER); '
            "other servers offer every tool their denylist lets through"
        )
    common: dict[str, Any] = {
        "name": name,
        "transport": transport,
        "timeout": float(timeout),
        "include": lists["include"],
        "exclude": lists["exclude"] or (),
        "policy": ToolPolicy(oikos=oikos, allow=lists["allow"] or (), deny=deny + (lists["deny"] or ())),
        "secret_expansions": frozenset(secret_expansions),
        **_hermes_options(entry, where),
    }
    if transport == "http":
        url = _required(entry, "url", where)
        if not url.startswith(("http://", "https://")):
            raise MCPConfigError(f'{where}: "url" must be an http:// or https:// URL, got {url!r}')
        config = ServerConfig(**common, url=url, headers=_string_map(entry, "headers", where))
    else:
        if common["oauth"] is not None:
            raise MCPConfigError(
                f'{where}: "hermes.oauth" is for HTTP servers; a stdio server takes credentials in "env"'
            )
        args = _optional(entry, "args", list, where, default=[])
        if not all(isinstance(arg, str) for arg in args):
            raise MCPConfigError(f'{where}: "args" must be a list of strings')
        config = ServerConfig(
            **common,
            command=_required(entry, "command", where),
            args=tuple(args),
            env=_string_map(entry, "env", where),
            cwd=_optional(entry, "cwd", str, where, default=None),
        )
    if config.envelope is not None:
        envelope = envelope_get(config.envelope)
        assert envelope is not None  # checked by _hermes_options
        envelope.config_check(config, where)
    return config


_HERMES_KEYS = {"peer", "envelope", "arguments", "protocol", "oauth"}


def _hermes_options(entry: dict[str, Any], where: str) -> dict[str, Any]:
    options = _optional(entry, "hermes", dict, where, default={})
    unknown = sorted(set(options) - _HERMES_KEYS)
    if unknown:
        raise MCPConfigError(f'{where}: unknown key "hermes.{unknown[0]}" (known: {", ".join(sorted(_HERMES_KEYS))})')
    peer = _optional(options, "peer", str, f"{where}, hermes", default=None)
    envelope = _optional(options, "envelope", str, f"{where}, hermes", default=None)
    if envelope is not None and envelope_get(envelope) is None:
        known = ", ".join(envelope_names()) or "none"
        raise MCPConfigError(f'{where}: unknown envelope "{envelope}" in "hermes.envelope" (known: {known})')
    arguments = _optional(options, "arguments", dict, f"{where}, hermes", default={})
    protocol = options.get("protocol", AUTO)
    if protocol not in PROTOCOL_CHOICES:
        raise MCPConfigError(
            f'{where}: "hermes.protocol" must be one of {", ".join(PROTOCOL_CHOICES)}, got {json.dumps(protocol)}'
        )
    oauth = None
    if "oauth" in options:
        try:
            oauth = oauth_config_parse(options["oauth"], where)
        except OAuthConfigError as exc:
            raise MCPConfigError(str(exc)) from None
    return {
        "peer": peer or None,
        "envelope": envelope,
        "fixed_arguments": dict(arguments),
        "protocol": protocol,
        "oauth": oauth,
    }


def _transport(entry: dict[str, Any], where: str) -> Transport:
    kind = _optional(entry, "type", str, where, default=None)
    if kind is None:
        if "command" in entry:
            return "stdio"
        if "url" in entry:
            return "http"
        raise MCPConfigError(f'{where}: needs "command" (stdio) or "type": "http" with "url"')
    transport = _TRANSPORT_NAMES.get(kind.lower())
    if transport is None:
        hint = " (the legacy SSE transport is not supported; use Streamable HTTP)" if kind == "sse" else ""
        raise MCPConfigError(f'{where}: unknown transport type {kind!r}{hint}; use "http" or "stdio"')
    return transport


_TOOLS_KEYS = ("include", "exclude", "allow", "deny")


def _tool_lists(entry: dict[str, Any], where: str) -> dict[str, tuple[str, ...] | None]:
    """The `"tools"` lists by key; None for a list that is absent (no `include` means everything)."""
    tools = _optional(entry, "tools", dict, where, default={})
    unknown = sorted(set(tools) - set(_TOOLS_KEYS))
    if unknown:
        raise MCPConfigError(f'{where}: unknown key "tools.{unknown[0]}" (known: {", ".join(_TOOLS_KEYS)})')
    lists: dict[str, tuple[str, ...] | None] = {}
    for key in _TOOLS_KEYS:
        value = tools.get(key)
        if value is not None and (not isinstance(value, list) or not all(isinstance(v, str) for v in value)):
            raise MCPConfigError(f'{where}: "tools.{key}" must be a list of tool names')
        lists[key] = None if value is None else tuple(value)
    return lists


def config_file_read(path: Path, *, kind: str, setting: str, error: type[MCPConfigError]) -> Any:
    """The JSON document in a configuration file; raises `error` naming the file on any problem.

    A missing file's message also names `setting`, the variable that points at it.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise error(f"{kind} {path} does not exist ({setting})") from None
    except OSError as exc:
        raise error(f"{kind} {path} cannot be read: {exc}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise error(f"{kind} {path} is not valid JSON: {exc}") from None


def config_value_expand(value: Any, path: str, where: str, environ: Mapping[str, str], secrets: set[str]) -> Any:
    """Expand `${VAR}` / `${VAR:-default}` in every string inside `value` (shell semantics for `:-`).

    `path` names the field being expanded (`headers.Authorization`, `args[2]`) for the error message;
    values of secret-named variables are added to `secrets`.
    """
    if isinstance(value, str):

        def substitute(match: re.Match[str]) -> str:
            variable, default = match.group(1), match.group(2)
            current = environ.get(variable)
            if default is not None and not current:
                return default
            if current is None:
                raise MCPConfigError(
                    f"{where}, field {path}: environment variable {variable} is not set "
                    f"(set it, or write ${{{variable}:-default}})"
                )
            if _SECRET_VARIABLE.search(variable):
                secrets.add(current)
            return current

        return _VARIABLE.sub(substitute, value)
    if isinstance(value, list):
        return [
            config_value_expand(item, f"{path}[{index}]", where, environ, secrets) for index, item in enumerate(value)
        ]
    if isinstance(value, dict):
        return {key: config_value_expand(item, f"{path}.{key}", where, environ, secrets) for key, item in value.items()}
    return value


def _required(entry: dict[str, Any], key: str, where: str) -> str:
    value = entry.get(key)
    if not isinstance(value, str) or not value:
        raise MCPConfigError(f'{where}: "{key}" is required and must be a non-empty string')
    return value


def _optional(entry: dict[str, Any], key: str, kind: Any, where: str, *, default: Any) -> Any:
    value = entry.get(key)
    if value is None:
        return default
    if not isinstance(value, kind):
        raise MCPConfigError(f'{where}: "{key}" has the wrong type ({type(value).__name__})')
    return value


def _string_map(entry: dict[str, Any], key: str, where: str) -> dict[str, str]:
    value = _optional(entry, key, dict, where, default={})
    if not all(isinstance(item, str) for item in value.values()):
        raise MCPConfigError(f'{where}: every value of "{key}" must be a string')
    return dict(value)
