"""Building FerretDB v1 — the MongoDB wire-compatible stand-in — from its Go module source
into the artifact cache (``cache_dir("mongodb")``).

``go install …@version`` is not enough: the module's source lacks the generated
``build/version/version.txt``, without which the binary panics at start-up (and ``go
install`` also asks the module proxy for the version list, which may be refused). So the
source of the pinned version is fetched with ``go mod download``, copied, given its
version file and built with ``go build``.

One patch is applied: FerretDB v1 runs ``findAndModify`` as a query followed by a separate
update, so two concurrent receivers can both claim the same document — which MongoDB's
per-document atomicity rules out. The patch serialises ``findAndModify`` inside the (single)
FerretDB process, restoring that atomicity for this stand-in.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from collections.abc import Callable
from pathlib import Path

from brokers.errors import BrokerStartError, BrokerUnavailable
from brokers.golang import go_binary
from brokers.jvm import cache_dir
from brokers.local import run_checked

MODULE = "github.com/FerretDB/FerretDB"
VERSION = "v1.24.0"
#: Names the patched build (a new patch gets a new cache directory).
BUILD_ID = f"{VERSION}-serialized-findandmodify"

_FAM = "internal/handler/msg_findandmodify.go"
#: (file, exact text, replacement): each must match exactly once, or the build stops.
PATCHES: tuple[tuple[str, str, str], ...] = (
    (_FAM, '\t"fmt"\n\t"time"\n', '\t"fmt"\n\t"sync"\n\t"time"\n'),
    (
        _FAM,
        "\tres, err := h.findAndModifyDocument(connCtx, params)\n",
        "\tfindAndModifyMu.Lock()\n"
        "\tres, err := h.findAndModifyDocument(connCtx, params)\n"
        "\tfindAndModifyMu.Unlock()\n",
    ),
    (
        _FAM,
        "// findAndModifyResult represents information about modification made.\n",
        "// findAndModifyMu makes findAndModify atomic within this process (brokerbench patch).\n"
        "var findAndModifyMu sync.Mutex\n\n"
        "// findAndModifyResult represents information about modification made.\n",
    ),
)


def build_dir() -> Path:
    return cache_dir("mongodb") / f"ferretdb-{BUILD_ID}"


def binary() -> Path:
    return build_dir() / "ferretdb"


def built() -> bool:
    return (build_dir() / ".complete").exists() and binary().is_file()


def apply_patches(src: Path) -> None:
    """Apply :data:`PATCHES` to a copy of the source tree."""
    for relative, old, new in PATCHES:
        path = src / relative
        text = path.read_text()
        if text.count(old) != 1:
            raise BrokerStartError(
                f"FerretDB {VERSION}: {relative} does not match the expected source; "
                "cannot apply the findAndModify patch"
            )
        path.write_text(text.replace(old, new))


def build(log: Callable[[str], None]) -> Path:
    """Build the patched FerretDB once; later calls return the cached binary."""
    if built():
        return binary()
    go = go_binary()
    if go is None:
        raise BrokerUnavailable(
            "go not found: FerretDB (the local MongoDB stand-in) is built from source and "
            "needs Go ≥ 1.22 (https://go.dev/dl)"
        )
    dest = build_dir()
    tmp = dest.with_name(dest.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    log(f"building FerretDB {VERSION} from the Go module proxy into {dest} (once, ~2 min)…")
    info = json.loads(
        run_checked(
            [go, "mod", "download", "-json", f"{MODULE}@{VERSION}"],
            f"go mod download {MODULE}@{VERSION}",
            timeout=900,
        )
    )
    src = tmp / "src"
    shutil.copytree(info["Dir"], src)
    for root, dirs, files in os.walk(src):
        for name in dirs + files:
            path = Path(root) / name
            path.chmod(path.stat().st_mode | stat.S_IWUSR)
    src.chmod(src.stat().st_mode | stat.S_IWUSR)
    (src / "build" / "version" / "version.txt").write_text(VERSION + "\n")
    apply_patches(src)
    run_checked(
        [go, "build", "-trimpath", "-o", str(tmp / "ferretdb"), "./cmd/ferretdb"],
        f"go build of FerretDB {VERSION}",
        timeout=1800,
        cwd=str(src),
    )
    shutil.rmtree(src, ignore_errors=True)
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)
    (dest / ".complete").touch()
    log(f"FerretDB {VERSION} built: {binary()}")
    return binary()
