"""Pairing tokens: issued once by `a2a_pair`, stored as a digest, revocable in the admin."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from pytest_django.fixtures import Settings

from interop.models import PairingToken, PeerConversation
from interop.services import pairing_token_issue, pairing_token_verify

pytestmark = pytest.mark.django_db


def test_a2a_pair_prints_the_token_once_and_stores_only_its_digest(capsys: pytest.CaptureFixture[str]) -> None:
    call_command("a2a_pair", "garraia")
    out, err = capsys.readouterr()
    token = out.strip()
    assert token.startswith("hat_") and len(token) > 40
    assert "shown only now" in err and token not in err
    row = PairingToken.objects.get(peer="garraia")
    assert token.split("_", 2)[2] not in (row.digest, row.key_id)
    assert pairing_token_verify(token=token) == "garraia"
    assert PairingToken.objects.get(pk=row.pk).last_used_at is not None


def test_wrong_malformed_and_revoked_tokens_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    token = pairing_token_issue(peer="lab")
    key_id = token.split("_")[1]
    for wrong in ("", "hat_", f"hat_{key_id}_", f"hat_{key_id}_not-the-secret", token + "x", "Bearer " + token):
        assert pairing_token_verify(token=wrong) is None, wrong
    call_command("a2a_pair", "lab", "--revoke")
    assert "Revoked 1 token(s) of lab" in capsys.readouterr().err
    assert pairing_token_verify(token=token) is None


def test_the_admin_revokes_tokens_and_stops_conversations(settings: Settings) -> None:
    # Pages render without `collectstatic` (the manifest storage needs its manifest).
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }
    admin = User.objects.create_superuser("root", "root@example.com", "pw")
    client = Client()
    client.force_login(admin)
    token = pairing_token_issue(peer="lab")
    row = PairingToken.objects.get()
    changelist = client.get("/admin/interop/pairingtoken/")
    assert changelist.status_code == 200 and row.key_id in changelist.content.decode()
    assert row.digest not in client.get(f"/admin/interop/pairingtoken/{row.pk}/change/").content.decode()
    client.post("/admin/interop/pairingtoken/", {"action": "revoke", "_selected_action": [row.pk]})
    assert pairing_token_verify(token=token) is None

    conversation = PeerConversation.objects.create(peer="lab", dialect="a2a", direction="outbound", external_id="c1")
    client.post("/admin/interop/peerconversation/", {"action": "stop", "_selected_action": [conversation.pk]})
    conversation.refresh_from_db()
    assert (conversation.status, conversation.stop_reason) == ("stopped", "operator")
    # Nothing else can be changed there.
    assert client.post(f"/admin/interop/pairingtoken/{row.pk}/delete/").status_code == 403
