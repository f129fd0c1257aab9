"""WhiteNoise, usable from an async middleware chain.

WhiteNoise's middleware is synchronous only, and one synchronous middleware makes Django run the
whole chain of every request in a thread of its own (created per request under ASGI), calling the
async views back through `async_to_sync`: two thread hops per request, a thread per open `/chat`
stream while its turn starts, costly under many concurrent questions. This subclass
answers a request for a static file exactly as WhiteNoise does (its file lookup is a dict read,
or a filesystem check with autorefresh in development; the file is served from a thread), and
hands every other request on without leaving the event loop.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from django.http import HttpRequest
from whitenoise.middleware import WhiteNoiseMiddleware


class AsyncWhiteNoiseMiddleware(WhiteNoiseMiddleware):
    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Any = None, *args: Any, **kwargs: Any) -> None:
        super().__init__(get_response, *args, **kwargs)
        self._async = iscoroutinefunction(get_response)
        if self._async:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> Any:
        if self._async:
            return self._acall(request)
        return super().__call__(request)

    async def _acall(self, request: HttpRequest) -> Any:
        static_file = self.find_file(request.path_info) if self.autorefresh else self.files.get(request.path_info)
        if static_file is not None:
            return await sync_to_async(self.serve, thread_sensitive=False)(static_file, request)
        return await self.get_response(request)
