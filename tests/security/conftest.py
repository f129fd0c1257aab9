"""Settings for the access modes, applied per test through pytest-django's `settings` fixture."""

from __future__ import annotations

import pytest
from pytest_django.fixtures import Settings

from tests.security.asgi_client import TRUSTED_PROXY


@pytest.fixture
def proxy_mode(settings: Settings) -> Settings:
    """HERMES_AUTH=proxy behind a proxy at 10.9.0.0/24; members of `hermes-admins` are staff."""
    settings.HERMES_AUTH = "proxy"
    settings.HERMES_TRUSTED_PROXY_CIDRS = [f"{TRUSTED_PROXY.rsplit('.', 1)[0]}.0/24"]
    settings.HERMES_STAFF_GROUPS = ["hermes-admins"]
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    return settings


@pytest.fixture
def django_mode(settings: Settings) -> Settings:
    settings.HERMES_AUTH = "django"
    return settings
