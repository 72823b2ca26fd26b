"""Per-run credentials of the brokers started on this machine.

Each local broker gets a user name and a password generated for its run. Both are
letters and digits only, so they go into every configuration syntax and URL unescaped.
Clients get them through the cluster's :class:`~brokers.base.Endpoints` (``extra`` keys
``user`` and ``password``); the run context records only the endpoints' hosts and what
``describe`` reads back, which says ``auth`` but never the password. Files that hold the
password are written by :func:`write_private` (mode 0600) inside the broker's work
directory, which is removed when the broker stops.
"""

from __future__ import annotations

import os
import secrets
import shutil
from dataclasses import dataclass, field
from pathlib import Path

#: Prefix of the generated user names.
USER_PREFIX = "brokerbench"


@dataclass(frozen=True)
class Credentials:
    """A user and its password (left out of ``repr``, so it never lands in a log line)."""

    user: str
    password: str = field(repr=False)

    def extra(self) -> tuple[tuple[str, str], ...]:
        """The entries clients read from ``Endpoints.extra``."""
        return (("user", self.user), ("password", self.password))


def generate(user: str = "") -> Credentials:
    """Fresh credentials: ``user`` if given (e.g. a server's built-in user), else a
    generated name; a 128-bit random password in hexadecimal."""
    return Credentials(user or f"{USER_PREFIX}{secrets.token_hex(4)}", secrets.token_hex(16))


def auth(password: str) -> str:
    """How clients authenticate, for ``describe``: ``"password"`` or ``"none"``."""
    return "password" if password else "none"


def write_private(path: Path, text: str, owner: str = "") -> Path:
    """Write ``text`` to ``path`` readable by its owner only (0600), before any byte of it
    is written; ``owner`` (a user whose group has the same name) gets the file when we run
    as root and the server as that user."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as out:
        os.fchmod(descriptor, 0o600)  # an existing file keeps its mode on open
        out.write(text)
    if owner:
        shutil.chown(path, owner, owner)
    return path
