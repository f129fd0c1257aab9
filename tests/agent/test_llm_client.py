"""The model client's seam (`agent.llm`): what it costs a loaded server beyond the SDK's own work."""

from __future__ import annotations

import gc
import weakref
from typing import Any

from anthropic.lib.streaming import _messages as sdk_message_stream

import agent.llm  # noqa: F401  (what is tested: importing the seam keeps the class alive)


class TestSdkClasses:
    def test_the_class_the_sdk_names_at_every_response_outlives_collections(self) -> None:
        # The SDK evaluates `ParsedMessage[ResponseFormatT]` at every response's start; pydantic
        # holds parametrized classes weakly, so without the seam's reference each collection frees
        # it and the next model call builds the class again (2% of a loaded server's samples).
        generic: Any = sdk_message_stream.ParsedMessage
        named = weakref.ref(generic[sdk_message_stream.ResponseFormatT])
        gc.collect()
        assert named() is not None
        assert generic[sdk_message_stream.ResponseFormatT] is named()
