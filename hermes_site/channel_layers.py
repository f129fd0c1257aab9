"""The Redis channel layer's configuration, shared by the settings and the tests.

channels-redis waits for messages with a blocking `BZPOPMIN` of `brpop_timeout` seconds (5), and
redis-py 8 gives every connection a 5-second read timeout by default: the read gives up as the
server answers "nothing yet", and each idle websocket consumer dies with `TimeoutError` every few
seconds (django/channels_redis#422, redis/redis-py#4091). The read timeout here outlasts the
blocking wait, and still notices a dead connection.

redis-py 8 also caps a connection pool at 100 connections and fails the 101st operation at once
(`MaxConnectionsError`) instead of waiting: with 200 questions at once, hundreds of group sends
and joins failed, and a page joining a turn's group could miss its events. Each process's pool
here allows `MAX_CONNECTIONS` (Redis accepts 10,000 clients).

Each connection redis-py opens names its library and version to Redis (`CLIENT SETINFO`, 7.2+), and
looks its own version up in the installed package's metadata for that, a file read per connection,
and a burst of turns opens as many connections. The version is read once here.
"""

from __future__ import annotations

from typing import Any

import redis
from channels_redis.core import RedisChannelLayer
from redis.driver_info import DriverInfo

# How long past a blocking receive's own timeout the socket waits for Redis's answer.
READ_TIMEOUT_MARGIN_SECONDS = 10.0
CONNECT_TIMEOUT_SECONDS = 5.0
MAX_CONNECTIONS = 1000


def redis_channel_layer(
    url: str, *, prefix: str, capacity: int = 1000, max_connections: int = MAX_CONNECTIONS
) -> dict[str, Any]:
    """A `CHANNEL_LAYERS` entry for the Redis at `url`."""
    host = {
        "address": url,
        "max_connections": max_connections,
        "socket_timeout": RedisChannelLayer.brpop_timeout + READ_TIMEOUT_MARGIN_SECONDS,
        "socket_connect_timeout": CONNECT_TIMEOUT_SECONDS,
        "driver_info": DriverInfo(lib_version=redis.__version__),
    }
    return {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        "CONFIG": {"hosts": [host], "prefix": prefix, "capacity": capacity},
    }
