"""A per-installation secret key for development, kept in the data directory.

A key written in the source would be the same on every machine that runs Hermes without
configuration, so anyone could forge what Django signs. Instead the first process to start writes a
random key to `<data dir>/secret_key` (readable by its owner only) and every later process, including
concurrent ones, reads the same file. Production sets `HERMES_SECRET_KEY` instead (see settings).
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path


def secret_key_load(path: Path) -> str:
    """The key stored at `path`, created (atomically, mode 0600) when there is none yet."""
    try:
        return _read(path)
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    draft = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    descriptor = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w", encoding="ascii") as handle:
        handle.write(secrets.token_urlsafe(50))
    try:
        # A hard link appears complete or not at all and never replaces a key another process won with.
        os.link(draft, path)
    except FileExistsError:
        pass
    finally:
        draft.unlink()
    return _read(path)


def _read(path: Path) -> str:
    key = path.read_text(encoding="ascii").strip()
    if not key:
        raise ValueError(f"{path} is empty: delete it and Hermes will write a new key")
    return key
