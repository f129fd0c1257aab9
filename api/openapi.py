"""`GET /openapi.json`: the API's description, shipped as `openapi.json` beside this module.

The served copy names the URL prefix as its server, so tools that read it call the right paths
behind a proxy, and lists the models this server offers (`HERMES_MODELS`) as the values of
`/chat`'s `model`, so a client can tell which it may pick.
"""

from __future__ import annotations

import copy
import functools
import json
from pathlib import Path
from typing import Any

from django.conf import settings
from django.http import HttpRequest, JsonResponse

from agent.llm import ModelConfig
from api.errors import api_view

OPENAPI_PATH = Path(__file__).with_name("openapi.json")


@functools.cache
def openapi_document() -> dict[str, Any]:
    """The document as shipped (its `servers` says `/`)."""
    return json.loads(OPENAPI_PATH.read_text(encoding="utf-8"))


@api_view("GET")
async def openapi(request: HttpRequest) -> JsonResponse:
    document = copy.deepcopy(openapi_document())
    document["servers"] = [{"url": settings.HERMES_URL_PREFIX or "/"}]
    models = list(ModelConfig.from_settings().models)
    document["components"]["schemas"]["ChatRequest"]["properties"]["model"]["enum"] = models
    return JsonResponse(document)
