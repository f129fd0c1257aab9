"""Signing in, as the control room and the admin tell it: no "Log out" where there is nothing to end."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client
from pytest_django.fixtures import Settings

pytestmark = pytest.mark.django_db


class TestLocalMode:
    def test_the_control_room_says_who_you_are_and_offers_no_log_out(self, client: Client) -> None:
        page = client.get("/ui/").content.decode()

        assert '<span class="operator-via">· local operator</span>' in page
        assert "HERMES_AUTH=local" in page
        assert "Log out" not in page

    def test_the_admin_offers_no_log_out_either(self, client: Client) -> None:
        page = client.get("/admin/").content.decode()

        assert "local operator, no sign-in" in page
        assert "Log out" not in page and 'id="logout-form"' not in page

    def test_logging_out_anyway_says_nothing_changed_and_nothing_does(self, client: Client) -> None:
        answer = client.post("/admin/logout/").content.decode()

        assert "Nothing to log out of" in answer and "HERMES_AUTH=local" in answer
        assert "Thanks for spending" not in answer
        assert client.get("/ui/").status_code == 200


class TestDjangoMode:
    def test_log_out_ends_the_sign_in(self, client: Client, settings: Settings) -> None:
        settings.HERMES_AUTH = "django"
        client.force_login(User.objects.create_user("ines", password="a long passphrase"))
        page = client.get("/ui/").content.decode()
        assert 'class="sign-out"' in page and "Log out" in page and "local operator" not in page

        logged_out = client.post("/accounts/logout/", {"next": "/accounts/login/"})

        assert logged_out.status_code == 302 and logged_out["Location"] == "/accounts/login/"
        again = client.get("/ui/", headers={"Accept": "text/html"})
        assert again.status_code == 302 and again["Location"].startswith("/accounts/login/")
