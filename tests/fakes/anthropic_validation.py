"""The request checks of the Messages API that a tool-using client can get wrong.

Each check answers the way the real API does: status 400 `invalid_request_error` with a message
worded like the API's (field path first), or 404 `not_found_error` for an unknown model. They run
in the API's order: the body's shape, the tool list, cache breakpoints, then the conversation.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Any

from tests.fakes.anthropic_script import ApiError, Reply, ToolUseBlock

TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
MAX_CACHE_BREAKPOINTS = 4


class RequestRejected(Exception):
    def __init__(self, error: ApiError) -> None:
        super().__init__(error.message)
        self.error = error


def _invalid(message: str) -> RequestRejected:
    return RequestRejected(ApiError(status=400, type="invalid_request_error", message=message))


def request_problem(body: Any, *, known_models: Collection[str]) -> ApiError | None:
    """The error the API would answer `body` with, or None when it would accept it."""
    try:
        _check_request(body, known_models=known_models)
    except RequestRejected as rejected:
        return rejected.error
    return None


def _check_request(body: Any, *, known_models: Collection[str]) -> None:
    if not isinstance(body, dict):
        raise _invalid("Input should be a valid dictionary or object to extract fields from")
    for required in ("model", "max_tokens", "messages"):
        if required not in body:
            raise _invalid(f"{required}: Field required")
    max_tokens = body["max_tokens"]
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool):
        raise _invalid("max_tokens: Input should be a valid integer")
    if max_tokens < 1:
        raise _invalid("max_tokens: Input should be greater than or equal to 1")
    _check_system(body.get("system"))
    _check_tools(body.get("tools"))
    _check_messages(body["messages"])
    _check_tools_defined(body)
    _check_cache_breakpoints(body)
    _check_tool_pairing(body["messages"])
    if body["model"] not in known_models:
        raise RequestRejected(ApiError(status=404, type="not_found_error", message=f"model: {body['model']}"))


def _check_system(system: Any) -> None:
    if system is None or isinstance(system, str):
        return
    if not isinstance(system, list):
        raise _invalid("system: Input should be a valid string or a list of text blocks")
    for index, block in enumerate(system):
        if not isinstance(block, dict) or block.get("type") != "text" or not isinstance(block.get("text"), str):
            raise _invalid(f"system.{index}: Input should be a text block")
        if not block["text"]:
            raise _invalid("system: text content blocks must be non-empty")


def _check_tools(tools: Any) -> None:
    if tools is None:
        return
    if not isinstance(tools, list):
        raise _invalid("tools: Input should be a valid list")
    seen: set[str] = set()
    for index, tool in enumerate(tools):
        if not isinstance(tool, dict):
            raise _invalid(f"tools.{index}: Input should be a valid dictionary")
        if tool.get("type") not in (None, "custom"):
            continue  # a server tool (web search, ...): its own schema, not checked here
        name = tool.get("name")
        if not isinstance(name, str):
            raise _invalid(f"tools.{index}.custom.name: Field required")
        if not TOOL_NAME.match(name):
            raise _invalid(f"tools.{index}.custom.name: String should match pattern '{TOOL_NAME.pattern}'")
        schema = tool.get("input_schema")
        if not isinstance(schema, dict):
            raise _invalid(f"tools.{index}.custom.input_schema: Field required")
        if schema.get("type") != "object":
            raise _invalid(f"tools.{index}.custom.input_schema.type: Input should be 'object'")
        if name in seen:
            raise _invalid("tools: Tool names must be unique.")
        seen.add(name)


def _check_messages(messages: Any) -> None:
    if not isinstance(messages, list):
        raise _invalid("messages: Input should be a valid list")
    if not messages:
        raise _invalid("messages: at least one message is required")
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise _invalid(f"messages.{index}: Input should be a valid dictionary")
        if message.get("role") not in ("user", "assistant"):
            raise _invalid(f"messages.{index}.role: Input should be 'user' or 'assistant'")
        content = message.get("content")
        is_final_assistant = index == len(messages) - 1 and message["role"] == "assistant"
        if isinstance(content, str):
            if not content and not is_final_assistant:
                raise _invalid(
                    f"messages.{index}: all messages must have non-empty content except for the "
                    "optional final assistant message"
                )
            continue
        if not isinstance(content, list):
            raise _invalid(f"messages.{index}.content: Input should be a valid string or list")
        if not content and not is_final_assistant:
            raise _invalid(
                f"messages.{index}: all messages must have non-empty content except for the "
                "optional final assistant message"
            )
        for block_index, block in enumerate(content):
            _check_content_block(block, where=f"messages.{index}.content.{block_index}", role=message["role"])
    if messages[0]["role"] != "user":
        raise _invalid('messages: first message must use the "user" role')


def _check_content_block(block: Any, *, where: str, role: str) -> None:
    if not isinstance(block, dict) or not isinstance(block.get("type"), str):
        raise _invalid(f"{where}: Input should be a content block with a type")
    kind = block["type"]
    if kind == "text":
        if not isinstance(block.get("text"), str):
            raise _invalid(f"{where}.text: Field required")
        if not block["text"]:
            raise _invalid("messages: text content blocks must be non-empty")
    elif kind == "tool_use":
        if role != "assistant":
            raise _invalid(f"{where}: `tool_use` blocks can only be in `assistant` messages")
        for field_name in ("id", "name", "input"):
            if field_name not in block:
                raise _invalid(f"{where}.tool_use.{field_name}: Field required")
        if not isinstance(block["input"], dict):
            raise _invalid(f"{where}.tool_use.input: Input should be a valid dictionary")
    elif kind == "tool_result":
        if role != "user":
            raise _invalid(f"{where}: `tool_result` blocks can only be in `user` messages")
        if not isinstance(block.get("tool_use_id"), str):
            raise _invalid(f"{where}.tool_result.tool_use_id: Field required")
        nested = block.get("content")
        if nested is not None and not isinstance(nested, str | list):
            raise _invalid(f"{where}.tool_result.content: Input should be a valid string or list")
        for inner in nested if isinstance(nested, list) else []:
            if isinstance(inner, dict) and inner.get("type") == "text" and not inner.get("text"):
                raise _invalid("messages: text content blocks must be non-empty")


def _check_tools_defined(body: dict[str, Any]) -> None:
    """A conversation holding tool calls or results needs tools defined (any tools: the API does
    not match the history's tool names against the list)."""
    if body.get("tools"):
        return
    for message in body["messages"]:
        if any(block.get("type") in ("tool_use", "tool_result") for block in _blocks(message)):
            raise _invalid("Requests which include `tool_use` or `tool_result` blocks must define tools.")


def _check_cache_breakpoints(body: dict[str, Any]) -> None:
    """At most four breakpoints across tools, system and messages (the top-level one included)."""
    found = sum(1 for tool in body.get("tools") or [] if _marked(tool))
    system = body.get("system")
    if isinstance(system, list):
        found += sum(1 for block in system if _marked(block))
    for message in body["messages"]:
        if isinstance(message["content"], list):
            for block in message["content"]:
                found += _marked(block)
                if block.get("type") == "tool_result" and isinstance(block.get("content"), list):
                    found += sum(1 for nested in block["content"] if _marked(nested))
    found += body.get("cache_control") is not None
    if found > MAX_CACHE_BREAKPOINTS:
        raise _invalid(
            f"A maximum of {MAX_CACHE_BREAKPOINTS} blocks with cache_control may be provided. Found {found}."
        )


def _marked(block: Any) -> bool:
    return isinstance(block, dict) and block.get("cache_control") is not None


def _check_tool_pairing(messages: list[dict[str, Any]]) -> None:
    """Every tool_use answered at the start of the next user message; every result asked for."""
    for index, message in enumerate(messages):
        following = messages[index + 1] if index + 1 < len(messages) else None
        if message["role"] == "assistant":
            calls = [block["id"] for block in _blocks(message) if block["type"] == "tool_use"]
            answered = _leading_result_ids(following) if following and following["role"] == "user" else []
            missing = [tool_use_id for tool_use_id in calls if tool_use_id not in answered]
            if missing:
                raise _invalid(
                    f"messages.{index}: `tool_use` ids were found without `tool_result` blocks immediately "
                    f"after: {', '.join(missing)}. Each `tool_use` block must have a corresponding "
                    "`tool_result` block in the next message."
                )
        else:
            previous = messages[index - 1] if index > 0 else None
            asked: set[str] = (
                {block["id"] for block in _blocks(previous) if block["type"] == "tool_use"}
                if previous is not None and previous["role"] == "assistant"
                else set()
            )
            _check_results_asked_for(message, index=index, asked=asked)


def _check_results_asked_for(message: dict[str, Any], *, index: int, asked: set[str]) -> None:
    seen: set[str] = set()
    for block_index, block in enumerate(_blocks(message)):
        if block["type"] != "tool_result":
            continue
        tool_use_id = block["tool_use_id"]
        if tool_use_id not in asked:
            raise _invalid(
                f"messages.{index}.content.{block_index}: unexpected `tool_use_id` found in `tool_result` "
                f"blocks: {tool_use_id}. Each `tool_result` block must have a corresponding `tool_use` "
                "block in the previous message."
            )
        if tool_use_id in seen:
            raise _invalid(
                f"messages.{index}.content.{block_index}: each `tool_use` must have a single result. "
                f"Found multiple `tool_result` blocks with id: {tool_use_id}"
            )
        seen.add(tool_use_id)


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message["content"]
    return content if isinstance(content, list) else []


def _leading_result_ids(message: dict[str, Any]) -> list[str]:
    """Ids of the tool_result blocks that open the message (text may follow them, not precede)."""
    ids: list[str] = []
    for block in _blocks(message):
        if block["type"] != "tool_result":
            break
        ids.append(block["tool_use_id"])
    return ids


def prompt_too_long(tokens: int, *, window: int | None) -> ApiError | None:
    """The API's refusal of a prompt longer than the model's context window, worded as it words it."""
    if window is None or tokens <= window:
        return None
    return ApiError(
        status=400, type="invalid_request_error", message=f"prompt is too long: {tokens} tokens > {window} maximum"
    )


def impossible_reply(reply: Reply, body: dict[str, Any]) -> str | None:
    """Why a real model could not give the scripted `reply` to `body`, or None when it could.

    The API lets a model call only the tools the request offers, and none under
    `tool_choice: {"type": "none"}`. A script that breaks this (a typo in a tool name, or
    a responder that keeps calling tools when the client asks for a final answer without
    them) would let a test pass against behaviour no real model shows.
    """
    calls = [block.name for block in reply.content if isinstance(block, ToolUseBlock)]
    if not calls:
        return None
    offered = [tool.get("name") for tool in body.get("tools") or [] if isinstance(tool, dict)]
    tool_choice = body.get("tool_choice")
    if not offered or (isinstance(tool_choice, dict) and tool_choice.get("type") == "none"):
        return (
            f"the scripted reply calls {', '.join(calls)}, but the request lets the model call no tool "
            "(no tools, or tool_choice none); script a text reply for it"
        )
    unknown = [name for name in calls if name not in offered]
    if unknown:
        return (
            f"the scripted reply calls {', '.join(unknown)}, which the request does not offer "
            f"(offered: {', '.join(str(name) for name in offered)})"
        )
    return None
