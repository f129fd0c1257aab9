from __future__ import annotations

from django.urls import path

from controlroom.consumers import ControlRoomConsumer

websocket_urlpatterns = [
    path("ws/ui/", ControlRoomConsumer.as_asgi()),
]
