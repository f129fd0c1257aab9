from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent.tools.config import MCPConfigError, ServerConfig, mcp_config_load, mcp_servers_from_settings

ENV = {"OIKOS_URL": "https://oikos.lan:8443/mcp", "OIKOS_TOKEN": "s3cret-oikos-token", "EMPTY": ""}


def write(tmp_path: Path, servers: Any) -> Path:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")
    return path


def load(tmp_path: Path, servers: Any, environ: dict[str, str] | None = None) -> list[ServerConfig]:
    return mcp_config_load(write(tmp_path, servers), default_timeout=180.0, environ=environ or ENV)


class TestTransports:
    @pytest.mark.parametrize("kind", ["http", "streamable-http", "streamableHttp"])
    def test_http_server_with_expanded_url_and_bearer(self, tmp_path: Path, kind: str) -> None:
        [server] = load(
            tmp_path,
            {
                "oikos": {
                    "type": kind,
                    "url": "${OIKOS_URL}",
                    "headers": {"Authorization": "Bearer ${OIKOS_TOKEN}"},
                }
            },
        )
        assert server.transport == "http"
        assert server.url == "https://oikos.lan:8443/mcp"
        assert server.headers == {"Authorization": "Bearer s3cret-oikos-token"}
        assert server.timeout == 180.0

    def test_stdio_server_expands_command_args_env_and_cwd(self, tmp_path: Path) -> None:
        [server] = load(
            tmp_path,
            {
                "garra": {
                    "command": "${TOOLS:-/opt/garra}/bin/garra",
                    "args": ["mcp", "--token", "${OIKOS_TOKEN}", "--mode=${MODE:-readonly}"],
                    "env": {"GARRA_TOKEN": "${OIKOS_TOKEN}", "GARRA_LOG": "${LOG:-info}"},
                    "cwd": "${HOME_DIR:-/srv/garra}",
                    "timeout": 30,
                }
            },
        )
        assert server.transport == "stdio"
        assert server.command == "/opt/garra/bin/garra"
        assert server.args == ("mcp", "--token", "s3cret-oikos-token", "--mode=readonly")
        assert server.env == {"GARRA_TOKEN": "s3cret-oikos-token", "GARRA_LOG": "info"}
        assert server.cwd == "/srv/garra"
        assert server.timeout == 30.0

    def test_transport_is_inferred_without_type(self, tmp_path: Path) -> None:
        servers = load(tmp_path, {"a": {"url": "http://127.0.0.1:1/mcp"}, "b": {"command": "b"}})
        assert [server.transport for server in servers] == ["http", "stdio"]

    def test_disabled_server_is_skipped_even_with_unset_variables(self, tmp_path: Path) -> None:
        servers = load(
            tmp_path,
            {
                "old": {"type": "http", "url": "${NOT_SET_ANYWHERE}", "disabled": True},
                "new": {"command": "x"},
            },
        )
        assert [server.name for server in servers] == ["new"]


class TestExpansion:
    def test_default_applies_when_unset_or_empty_but_not_when_set(self, tmp_path: Path) -> None:
        [server] = load(
            tmp_path,
            {
                "s": {
                    "command": "x",
                    "args": ["${UNSET:-d1}", "${EMPTY:-d2}", "${OIKOS_TOKEN:-d3}", "${EMPTY}"],
                }
            },
        )
        assert server.args == ("d1", "d2", "s3cret-oikos-token", "")

    def test_unset_variable_names_variable_server_field_and_file(self, tmp_path: Path) -> None:
        path = write(
            tmp_path,
            {
                "oikos": {
                    "type": "http",
                    "url": "${OIKOS_URL}",
                    "headers": {"Authorization": "Bearer ${NO_TOKEN}"},
                }
            },
        )
        with pytest.raises(MCPConfigError) as raised:
            mcp_config_load(path, default_timeout=180.0, environ=ENV)
        message = str(raised.value)
        assert "NO_TOKEN" in message
        assert "'oikos'" in message
        assert "headers.Authorization" in message
        assert str(path) in message

    def test_unset_variable_in_args_names_position(self, tmp_path: Path) -> None:
        with pytest.raises(MCPConfigError, match=r"args\[1\].*MISSING_ARG"):
            load(tmp_path, {"g": {"command": "g", "args": ["ok", "${MISSING_ARG}"]}})


class TestMalformed:
    @pytest.mark.parametrize(
        ("servers", "expected"),
        [
            ({"s": {"type": "sse", "url": "http://x/sse"}}, "unknown transport type 'sse'"),
            ({"s": {"type": "carrier-pigeon", "command": "x"}}, "unknown transport"),
            ({"s": {"type": "http"}}, '"url" is required'),
            ({"s": {"type": "http", "url": "ftp://x"}}, "http:// or https://"),
            ({"s": {"command": "x", "args": "not a list"}}, '"args" has the wrong type'),
            ({"s": {"command": "x", "args": [1, 2]}}, "list of strings"),
            ({"s": {"command": "x", "env": {"A": 1}}}, 'every value of "env"'),
            ({"s": {"command": "x", "timeout": 0}}, "positive number"),
            ({"s": {"command": "x", "timeout": "fast"}}, '"timeout" has the wrong type'),
            ({"s": {"command": "x", "tools": {"include": "echo"}}}, "tools.include"),
            ({"s": {"command": "x", "tools": {"deny": "sudo*"}}}, "tools.deny"),
            # A typo in a security list must not silently leave a tool offered.
            ({"s": {"command": "x", "tools": {"denny": ["sudo*"]}}}, 'unknown key "tools.denny"'),
            ({"s": {"command": "x", "tools": {"allow": ["approve"]}}}, '"tools.allow" is only for the Oikos server'),
            ({"s": ["not", "an", "object"]}, "expected an object"),
            ({"s": {}}, 'needs "command"'),
        ],
    )
    def test_bad_entries_are_clear_errors(self, tmp_path: Path, servers: Any, expected: str) -> None:
        with pytest.raises(MCPConfigError, match="server 's'") as raised:
            load(tmp_path, servers)
        assert expected in str(raised.value)

    def test_invalid_json_names_the_file(self, tmp_path: Path) -> None:
        path = tmp_path / "mcp.json"
        path.write_text('{"mcpServers": {', encoding="utf-8")
        with pytest.raises(MCPConfigError, match="not valid JSON") as raised:
            mcp_config_load(path, default_timeout=1, environ={})
        assert str(path) in str(raised.value)

    def test_missing_mcp_servers_key(self, tmp_path: Path) -> None:
        path = tmp_path / "mcp.json"
        path.write_text('{"servers": {}}', encoding="utf-8")
        with pytest.raises(MCPConfigError, match="mcpServers"):
            mcp_config_load(path, default_timeout=1, environ={})

    def test_missing_file(self, tmp_path: Path) -> None:
        with pytest.raises(MCPConfigError, match="does not exist"):
            mcp_config_load(tmp_path / "nope.json", default_timeout=1, environ={})


class TestServerConfig:
    def test_filters_take_exact_names_and_patterns(self, tmp_path: Path) -> None:
        [server] = load(
            tmp_path,
            {"s": {"command": "x", "tools": {"include": ["get_*", "echo"], "exclude": ["get_entity"]}}},
        )
        allowed = [
            tool
            for tool in ["get_health_summary", "get_entity", "echo", "echo2", "fail", "get_blast_radius"]
            if server.allows(tool)
        ]
        assert allowed == ["get_health_summary", "echo", "get_blast_radius"]

    def test_only_the_server_named_oikos_is_oikos_and_deny_patterns_add_up(self, tmp_path: Path) -> None:
        path = write(
            tmp_path,
            {
                "homelab": {"command": "x", "tools": {"allow": ["get_execution_logs"]}},
                "oikos": {"command": "y", "tools": {"deny": ["sudo*"]}},
            },
        )
        homelab, other = mcp_config_load(path, default_timeout=1, environ={}, oikos_server="homelab", deny=["*wipe*"])

        assert (homelab.oikos, other.oikos) == (True, False)
        assert homelab.allows("get_execution_logs") and other.allows("get_execution_logs")
        assert not homelab.allows("list_pending_executions") and other.allows("list_pending_executions")
        assert not other.allows("sudoRun") and homelab.allows("sudo_run", read_only=True)
        assert not homelab.allows("wipe_disk", read_only=True) and not other.allows("WipeDisk")
        # Decision tools are the Oikos server's business: unknown there, any name; elsewhere, no name decides.
        assert other.allows("grant_approval") and not homelab.allows("grantApproval")

    def test_no_filters_allow_everything(self) -> None:
        server = ServerConfig(name="s", transport="stdio", timeout=1, command="x")
        assert server.allows("anything")

    def test_secret_values_cover_headers_env_and_bare_bearer_token(self, tmp_path: Path) -> None:
        [http, stdio] = load(
            tmp_path,
            {
                "oikos": {
                    "type": "http",
                    "url": "${OIKOS_URL}",
                    "headers": {"Authorization": "Bearer ${OIKOS_TOKEN}", "X-Short": "yes"},
                },
                "garra": {"command": "g", "env": {"GARRA_KEY": "garra-key-123456", "DEBUG": "1"}},
            },
        )
        assert http.secret_values() == {"Bearer s3cret-oikos-token", "s3cret-oikos-token"}
        assert stdio.secret_values() == {"garra-key-123456"}
        assert "s3cret" not in repr(http)
        assert "garra-key" not in repr(stdio)

    def test_secret_named_variables_are_secrets_wherever_they_are_used(self, tmp_path: Path) -> None:
        [server] = load(
            tmp_path,
            {"g": {"command": "g", "args": ["--token", "${OIKOS_TOKEN}", "--url", "${OIKOS_URL}"]}},
        )
        assert server.secret_values() == {"s3cret-oikos-token"}

    def test_target_never_shows_credentials(self, tmp_path: Path) -> None:
        [http, stdio] = load(
            tmp_path,
            {
                "a": {
                    "type": "http",
                    "url": "https://user:${OIKOS_TOKEN}@oikos.lan/mcp?token=${OIKOS_TOKEN}",
                },
                "b": {"command": "/usr/bin/garra", "args": ["--token", "${OIKOS_TOKEN}"]},
            },
        )
        assert http.target == "https://oikos.lan/mcp"
        assert stdio.target == "/usr/bin/garra"


class TestFromSettings:
    def test_no_file_and_no_url_means_no_servers(self, settings: Any) -> None:
        settings.HERMES_MCP_CONFIG = None
        settings.OIKOS_MCP_URL = None
        assert mcp_servers_from_settings() == []

    def test_oikos_from_url_and_token(self, settings: Any) -> None:
        settings.HERMES_MCP_CONFIG = None
        settings.OIKOS_MCP_URL = "http://oikos.lan/mcp"
        settings.OIKOS_MCP_TOKEN = "hermes-token-abcdef"
        settings.HERMES_MCP_TIMEOUT = 42.0
        [server] = mcp_servers_from_settings()
        assert (server.name, server.transport, server.url, server.timeout) == (
            "oikos",
            "http",
            "http://oikos.lan/mcp",
            42.0,
        )
        assert server.headers == {"Authorization": "Bearer hermes-token-abcdef"}
        assert "hermes-token-abcdef" in server.secret_values()
        assert server.oikos

    def test_file_wins_over_oikos_url(self, settings: Any, tmp_path: Path) -> None:
        settings.HERMES_MCP_CONFIG = str(write(tmp_path, {"garra": {"command": "garra"}}))
        settings.OIKOS_MCP_URL = "http://oikos.lan/mcp"
        assert [server.name for server in mcp_servers_from_settings()] == ["garra"]

    def test_default_timeout_comes_from_settings(self, settings: Any, tmp_path: Path) -> None:
        settings.HERMES_MCP_CONFIG = str(write(tmp_path, {"garra": {"command": "garra"}}))
        settings.HERMES_MCP_TIMEOUT = 180.0
        [server] = mcp_servers_from_settings()
        assert server.timeout == 180.0
