"""Built-in tools: tools that run inside Hermes rather than on an MCP server.

A `LocalTool` is listed and called through the hub exactly like an MCP tool — the model gets a
`ToolSpec`, the engine gets a `ToolOutcome`, the ledger gets the call — so the engine needs no
second path. Apps contribute them with `local_tool_register(factory)` from `AppConfig.ready()`;
the hub asks every factory for its tool when it is built from settings, and a factory answers
`None` when its tool has nothing to offer (e.g. `a2a_send` without any configured peer).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from agent.tools.context import ToolCallContext
from agent.tools.names import PREFIX, TOOL_NAME_PATTERN

if TYPE_CHECKING:
    from agent.conversation.outcomes import ToolOutcome

# The `server` shown for built-in tools in events, the UI and the ledger.
LOCAL_SERVER = "hermes"


@dataclass(frozen=True)
class LocalResult:
    """What a built-in tool returns: Anthropic content blocks for the model and a ledger record."""

    content: list[dict[str, Any]]
    is_error: bool = False
    record: dict[str, Any] = field(default_factory=dict)
    structured: Any | None = None

    @classmethod
    def text(cls, text: str, *, is_error: bool = False, record: dict[str, Any] | None = None) -> LocalResult:
        return cls(content=[{"type": "text", "text": text}], is_error=is_error, record=record or {"text": text})


class OikosCaller(Protocol):
    """What a built-in tool may ask of the hub it is listed on: a call of one of Oikos's tools,
    with the hub's rules (the turn's provenance, redaction, metrics), as if the model had made it."""

    @property
    def oikos_known(self) -> bool: ...

    async def oikos_call(self, tool: str, arguments: dict[str, Any], *, context: ToolCallContext) -> ToolOutcome: ...


class LocalTool(ABC):
    """A tool implemented in Hermes. Subclasses set the class attributes and implement `call`."""

    name: str
    description: str
    input_schema: dict[str, Any]
    read_only: bool = False

    def offered(self, context: ToolCallContext | None) -> bool:
        """Whether the model of a turn with this context should see the tool at all."""
        return True

    def hub_attach(self, hub: OikosCaller) -> None:
        """The hub this tool is listed on (each hub builds its own tools); most tools need nothing of it."""
        return None

    def secret_values(self) -> frozenset[str]:
        """Configured secrets this tool holds (tokens), scrubbed like MCP headers."""
        return frozenset()

    @abstractmethod
    async def call(self, arguments: dict[str, Any], context: ToolCallContext) -> LocalResult:
        """Run the tool. Failures the model can act on are `is_error` results, not exceptions."""


def local_tool_name_check(name: str) -> None:
    """Built-in names must be valid for the API and can never be mistaken for an MCP tool's."""
    if not TOOL_NAME_PATTERN.match(name) or name.startswith(PREFIX):
        raise ValueError(f"invalid built-in tool name {name!r}: use [a-zA-Z0-9_-], not starting with {PREFIX!r}")


LocalToolFactory = Callable[[], LocalTool | None]

_factories: dict[str, LocalToolFactory] = {}


def local_tool_register(name: str, factory: LocalToolFactory) -> None:
    """Make `factory` contribute the built-in tool `name` to every hub built from settings.

    Registering the same name again replaces the factory (apps may be set up more than once).
    The factory may raise `MCPConfigError` (or a subclass) when its configuration is unusable.
    """
    local_tool_name_check(name)
    _factories[name] = factory


def local_tools_from_settings() -> list[LocalTool]:
    """The built-in tools that have something to offer under the current settings."""
    tools = [factory() for factory in _factories.values()]
    return [tool for tool in tools if tool is not None]
