"""Who an HTTP request acts as, in each HERMES_AUTH mode, through the whole ASGI application."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from pytest_django.fixtures import Settings

from tests.security.asgi_client import MESH_PEER, TRUSTED_PROXY, http, proxy_headers
from tests.security.surfaces import HTTP_SURFACES

pytestmark = pytest.mark.django_db(transaction=True)

ALICE = proxy_headers("alice", email="alice@example.net", groups="users|hermes-admins")


def _welcome(page: str) -> str:
    """The user name the admin greets ("Welcome, <strong>alice</strong>")."""
    found = re.search(r"Welcome,\s*<strong>([^<]+)</strong>", page)
    assert found, "the admin did not greet anybody"
    return found.group(1)


class TestProxyMode:
    async def test_a_trusted_proxy_names_the_operator_who_is_created_on_first_sight(self, proxy_mode: Settings) -> None:
        assert not await User.objects.filter(username="alice").aexists()

        response = await http("/admin/", peer=TRUSTED_PROXY, headers=ALICE)

        assert response.status == 200
        assert _welcome(response.text) == "alice"
        alice = await User.objects.aget(username="alice")
        assert alice.email == "alice@example.net"
        assert alice.is_staff
        assert not alice.has_usable_password(), "a proxy user must never sign in with a password"

    @pytest.mark.parametrize(("method", "path"), HTTP_SURFACES)
    async def test_the_same_headers_from_any_other_address_are_refused(
        self, proxy_mode: Settings, method: str, path: str
    ) -> None:
        response = await http(path, method=method, peer=MESH_PEER, headers=ALICE)

        assert response.status == 403
        assert response.json()["error"]["code"] == "untrusted_identity_headers"
        assert not await User.objects.filter(username="alice").aexists()

    @pytest.mark.parametrize(("method", "path"), HTTP_SURFACES)
    @pytest.mark.parametrize("peer", [TRUSTED_PROXY, MESH_PEER])
    async def test_no_identity_header_is_refused(self, proxy_mode: Settings, method: str, path: str, peer: str) -> None:
        response = await http(path, method=method, peer=peer)

        assert response.status == 403
        assert response.json()["error"]["code"] == "not_signed_in"

    async def test_staff_follows_the_proxy_groups_on_every_request(self, proxy_mode: Settings) -> None:
        assert (await http("/admin/", peer=TRUSTED_PROXY, headers=ALICE)).status == 200

        demoted = proxy_headers("alice", email="alice@example.net", groups="users")
        response = await http("/admin/", peer=TRUSTED_PROXY, headers=demoted)

        assert response.status == 302
        assert response.headers["location"].startswith("/admin/login/")
        assert not (await User.objects.aget(username="alice")).is_staff

    async def test_an_operator_deactivated_in_hermes_stays_out(self, proxy_mode: Settings) -> None:
        await http("/admin/", peer=TRUSTED_PROXY, headers=ALICE)
        await User.objects.filter(username="alice").aupdate(is_active=False)

        response = await http("/admin/", peer=TRUSTED_PROXY, headers=ALICE)

        assert response.status == 403
        assert response.json()["error"]["code"] == "operator_disabled"

    async def test_a_utf8_user_name_from_authentik_is_read_as_utf8(self, proxy_mode: Settings) -> None:
        headers = proxy_headers("zoë".encode(), groups="hermes-admins")

        response = await http("/admin/", peer=TRUSTED_PROXY, headers=headers)

        assert response.status == 200
        assert _welcome(response.text) == "zoë"

    @pytest.mark.parametrize(
        "headers",
        [
            [("X-Authentik-Username", "alice"), ("X-Authentik-Username", "mallory")],
            [("X-Authentik-Username", "alice bob")],
            [("X-Authentik-Username", "x" * 151)],
        ],
        ids=["sent-twice", "space", "too-long"],
    )
    async def test_a_user_name_hermes_cannot_use_is_refused(
        self, proxy_mode: Settings, headers: list[tuple[str, str]]
    ) -> None:
        response = await http("/admin/", peer=TRUSTED_PROXY, headers=headers)

        assert response.status == 403
        assert response.json()["error"]["code"] == "invalid_identity"
        assert not await User.objects.aexists()


class TestLocalMode:
    async def test_everyone_on_the_allowed_networks_is_the_local_operator(self, settings: Settings) -> None:
        settings.HERMES_LOCAL_OPERATOR = "maria"

        response = await http("/admin/", peer=MESH_PEER)

        assert response.status == 200
        assert _welcome(response.text) == "maria"

    async def test_proxy_headers_mean_nothing(self) -> None:
        response = await http("/admin/", peer=MESH_PEER, headers=proxy_headers("mallory"))

        assert response.status == 200
        assert _welcome(response.text) == "operator"
        assert not await User.objects.filter(username="mallory").aexists()


class TestDjangoMode:
    async def test_an_anonymous_browser_is_sent_to_the_login_form(self, django_mode: Settings) -> None:
        response = await http("/admin/", headers=[("Accept", "text/html")])

        assert response.status == 302
        assert response.headers["location"] == "/accounts/login/?next=/admin/"

    @pytest.mark.parametrize(("method", "path"), HTTP_SURFACES)
    async def test_an_anonymous_script_is_refused(self, django_mode: Settings, method: str, path: str) -> None:
        response = await http(path, method=method, headers=[("Accept", "application/json")])

        assert response.status == 403
        assert response.json()["error"]["code"] == "not_signed_in"

    async def test_signing_in_with_the_form_opens_hermes(self, django_mode: Settings) -> None:
        await User.objects.acreate_user("ines", password="a long passphrase", is_staff=True, is_superuser=True)
        form = await http("/accounts/login/")
        assert form.status == 200
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text)
        assert token

        signed_in = await http(
            "/accounts/login/",
            method="POST",
            headers=[form.cookie_header(), ("content-type", "application/x-www-form-urlencoded")],
            body=f"csrfmiddlewaretoken={token.group(1)}&username=ines&password=a+long+passphrase&next=/admin/".encode(),
        )
        assert signed_in.status == 302
        assert signed_in.headers["location"] == "/admin/"

        admin = await http("/admin/", headers=[signed_in.cookie_header()])
        assert admin.status == 200
        assert _welcome(admin.text) == "ines"

    async def test_a_login_post_without_csrf_token_is_refused(self, django_mode: Settings) -> None:
        await User.objects.acreate_user("ines", password="a long passphrase")

        response = await http(
            "/accounts/login/",
            method="POST",
            headers=[("content-type", "application/x-www-form-urlencoded")],
            body=b"username=ines&password=a+long+passphrase",
        )

        assert response.status == 403
        assert "hermes_sessionid" not in response.set_cookies
