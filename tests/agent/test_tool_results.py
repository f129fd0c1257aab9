from __future__ import annotations

import json

from mcp.types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)

from agent.conversation.results import tool_result_blocks, tool_result_record, tool_result_structured

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="


class TestBlocks:
    def test_texts_join_into_one_block(self) -> None:
        result = CallToolResult(content=[TextContent(text="first"), TextContent(text="second")])
        assert tool_result_blocks(result) == [{"type": "text", "text": "first\nsecond"}]

    def test_structured_content_stands_in_when_there_is_no_text(self) -> None:
        result = CallToolResult(content=[], structured_content={"health": "degraded", "count": 1})
        [block] = tool_result_blocks(result)
        assert json.loads(block["text"]) == {"health": "degraded", "count": 1}

    def test_text_wins_over_structured_content(self) -> None:
        result = CallToolResult(content=[TextContent(text="summary")], structured_content={"a": 1})
        assert tool_result_blocks(result) == [{"type": "text", "text": "summary"}]

    def test_images_pass_through_as_base64_image_blocks(self) -> None:
        result = CallToolResult(content=[TextContent(text="topology"), ImageContent(data=PNG, mime_type="image/png")])
        assert tool_result_blocks(result) == [
            {"type": "text", "text": "topology"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
        ]

    def test_text_and_images_keep_the_order_the_server_sent(self) -> None:
        image = ImageContent(data=PNG, mime_type="image/png")
        result = CallToolResult(
            content=[image, TextContent(text="above: the edge"), TextContent(text="below: the core"), image]
        )
        picture = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}
        assert tool_result_blocks(result) == [
            picture,
            {"type": "text", "text": "above: the edge\nbelow: the core"},
            picture,
        ]

    def test_images_the_api_cannot_take_become_a_note(self) -> None:
        result = CallToolResult(content=[ImageContent(data="AAAA", mime_type="image/tiff")])
        [block] = tool_result_blocks(result)
        assert block["type"] == "text"
        assert "image/tiff" in block["text"]

    def test_embedded_resources_links_and_audio(self) -> None:
        result = CallToolResult(
            content=[
                EmbeddedResource(resource=TextResourceContents(uri="oikos://doc/1", text="runbook body")),
                EmbeddedResource(
                    resource=BlobResourceContents(uri="oikos://blob/2", blob="AAAA", mime_type="application/gzip")
                ),
                ResourceLink(name="logs", uri="oikos://logs/caddy"),
                AudioContent(data="AAAA", mime_type="audio/wav"),
            ]
        )
        [block] = tool_result_blocks(result)
        lines = block["text"].split("\n")
        assert lines[0] == "runbook body"
        assert "oikos://blob/2" in lines[1]
        assert "application/gzip" in lines[1]
        assert "oikos://logs/caddy" in lines[2]
        assert "audio/wav" in lines[3]

    def test_empty_result_is_never_an_empty_block_list(self) -> None:
        [block] = tool_result_blocks(CallToolResult(content=[]))
        assert block["type"] == "text"
        assert block["text"]


class TestStructuredAndRecord:
    def test_structured_prefers_structured_content(self) -> None:
        result = CallToolResult(content=[TextContent(text='{"a": 1}')], structured_content={"b": 2})
        assert tool_result_structured(result) == {"b": 2}

    def test_structured_parses_a_json_object_text(self) -> None:
        assert tool_result_structured(CallToolResult(content=[TextContent(text=' {"a": 1} ')])) == {"a": 1}

    def test_structured_is_none_for_plain_text_or_json_arrays(self) -> None:
        assert tool_result_structured(CallToolResult(content=[TextContent(text="hello")])) is None
        assert tool_result_structured(CallToolResult(content=[TextContent(text="[1, 2]")])) is None
        assert tool_result_structured(CallToolResult(content=[TextContent(text="{broken")])) is None

    def test_record_keeps_a_small_result_whole_and_is_json(self) -> None:
        result = CallToolResult(
            content=[TextContent(text="t"), ImageContent(data=PNG, mime_type="image/png")],
            structured_content={"k": [1, 2]},
            is_error=True,
        )
        record = json.loads(json.dumps(tool_result_record(result, max_chars=10_000)))
        assert record == {
            "content": [
                {"type": "text", "text": "t"},
                {"type": "image", "data": PNG, "mimeType": "image/png"},
            ],
            "structured_content": {"k": [1, 2]},
            "is_error": True,
        }


class TestBigResults:
    """A result is stored once, capped at the ledger's limit, with a note of what was cut."""

    LIMIT = 100_000

    def _structured_twice(self, size: int) -> CallToolResult:
        # What MCP servers send for structured output: the object, and its JSON as text.
        data = {"lines": ["caddy: served a request in 3 ms"] * (size // 36)}
        return CallToolResult(content=[TextContent(text=json.dumps(data))], structured_content=data)

    def test_structured_output_sent_twice_is_stored_once_and_capped(self) -> None:
        result = self._structured_twice(3_000_000)
        first = result.content[0]
        assert isinstance(first, TextContent)
        total = len(first.text)

        record = tool_result_record(result, max_chars=self.LIMIT)

        stored = json.dumps(record)
        # The limit counts the text's characters; JSON escapes its quotes when the row is written.
        assert len(stored) < self.LIMIT * 1.2, f"{len(stored):,} characters stored"
        assert len(record["content"][0]["text"]) < self.LIMIT + 300
        assert "structured_content" not in record
        assert "structured_content and as its JSON in the text content" in record["structured_content_omitted"]
        text = record["content"][0]["text"]
        assert text.startswith('{"lines": ["caddy') and text.endswith('3 ms"]}')
        assert f"the ledger keeps {self.LIMIT:,} of {total:,} characters" in text
        assert record["cut"] == {"total_chars": total, "cut_chars": total - self.LIMIT, "limit_chars": self.LIMIT}

    def test_a_small_result_is_kept_whole_with_its_structured_content(self) -> None:
        result = self._structured_twice(2_000)
        record = tool_result_record(result, max_chars=self.LIMIT)
        assert record["structured_content"] == result.structured_content
        first = result.content[0]
        assert isinstance(first, TextContent)
        assert record["content"][0]["text"] == first.text
        assert "cut" not in record

    def test_structured_content_without_text_is_the_copy_kept_capped_as_json_text(self) -> None:
        data = {"lines": ["x" * 100] * 5_000}
        record = tool_result_record(CallToolResult(content=[], structured_content=data), max_chars=self.LIMIT)
        assert "structured_content" not in record
        assert record["content"][0]["text"].startswith('{"lines": ["xxx')
        assert record["cut"]["cut_chars"] > 0

    def test_an_image_over_the_cap_is_replaced_by_a_note(self) -> None:
        image = ImageContent(data="A" * 200_000, mime_type="image/png")
        record = tool_result_record(CallToolResult(content=[TextContent(text="a chart"), image]), max_chars=self.LIMIT)
        assert record["content"][0] == {"type": "text", "text": "a chart"}
        assert record["content"][1]["type"] == "image" and "200,000 characters over" in record["content"][1]["omitted"]

    def test_structured_for_approvals_is_kept_for_small_results_only(self) -> None:
        assert tool_result_structured(self._structured_twice(2_000)) is not None
        assert tool_result_structured(self._structured_twice(3_000_000)) is None
        big_text = json.dumps({"lines": ["y" * 100] * 2_000})
        assert tool_result_structured(CallToolResult(content=[TextContent(text=big_text)])) is None
