"""Sealing what the database must not hold readable: OAuth tokens and client secrets.

The key is derived from Django's `SECRET_KEY` (HKDF-SHA256, so the sealing key is not the key that
signs cookies), and `SECRET_KEY_FALLBACKS` (`HERMES_SECRET_KEY_FALLBACKS`) still open what older
keys sealed: a key can be rotated without every server being connected again. What an older key
sealed is sealed again with the current one the next time it is stored.
"""

from __future__ import annotations

import base64

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings

_PURPOSE = b"hermes mcp oauth credentials"


class SealBroken(Exception):
    """A sealed value that no configured key opens (the secret key changed with no fallback)."""


def _fernet(secret: str) -> Fernet:
    key = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_PURPOSE).derive(secret.encode())
    return Fernet(base64.urlsafe_b64encode(key))


def _keys() -> MultiFernet:
    secrets = [str(settings.SECRET_KEY), *(str(key) for key in settings.SECRET_KEY_FALLBACKS)]
    return MultiFernet([_fernet(secret) for secret in secrets])


def seal(plain: str) -> str:
    """`plain`, encrypted and authenticated with the current secret key."""
    return _keys().encrypt(plain.encode()).decode("ascii")


def unseal(sealed: str) -> str:
    """What `seal` sealed, with the current key or a fallback. Raises `SealBroken`."""
    try:
        return _keys().decrypt(sealed.encode("ascii")).decode()
    except (InvalidToken, ValueError):
        raise SealBroken("sealed with a secret key that is no longer configured") from None
