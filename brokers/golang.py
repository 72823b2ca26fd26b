"""The Go toolchain that builds what comes as Go modules (FerretDB, the lazy filesystem):
``go`` on the PATH, or where the Go distribution installs itself."""

from __future__ import annotations

import shutil
from pathlib import Path

#: Where the Go distribution puts its command when it is not on the PATH.
GO_HOME_BINARY = Path("/usr/local/go/bin/go")


def go_binary() -> str | None:
    """The ``go`` command to build with, or None where there is none."""
    found = shutil.which("go")
    if found:
        return found
    return str(GO_HOME_BINARY) if GO_HOME_BINARY.is_file() else None
