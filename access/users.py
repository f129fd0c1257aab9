"""Django users for operators who sign in elsewhere: the local operator and sign-in proxy users.

A user is created the first time an identity is seen and kept in step with what the proxy says on
every later request (email; staff, from the groups), so a change in Authentik takes effect at once,
revocation included. Such users get no usable password: they can only ever come in the way they
first did. Staff get the whole admin (which is read-only for Hermes's own records). An operator
deactivated in the admin stays deactivated: the callers refuse inactive users.
"""

from __future__ import annotations

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction

from access.identity import Identity


def operator_user_sync(identity: Identity) -> User:
    """The Django user for a local or proxy identity, created on first sight, flags brought up to date.

    django-mode identities already are users and must not come here.
    """
    if identity.via == "django":
        raise ValueError("django-mode identities are Django users already")
    wanted: dict[str, object] = {"is_staff": identity.is_staff, "is_superuser": identity.is_staff}
    if identity.email:
        wanted["email"] = identity.email
    user = User.objects.filter(username=identity.username).first()
    if user is None:
        user = _user_create(identity.username, wanted)
    changed = [field for field, value in wanted.items() if getattr(user, field) != value]
    if changed:
        for field in changed:
            setattr(user, field, wanted[field])
        user.save(update_fields=changed)
    return user


def _user_create(username: str, fields: dict[str, object]) -> User:
    user = User(username=username, **fields)
    user.set_unusable_password()
    try:
        with transaction.atomic():
            user.save()
    except IntegrityError:
        # Two first requests of one operator raced; the other one created the user.
        return User.objects.get(username=username)
    return user
