"""``brokerbench setup``: install what local brokers need — Debian packages (as root) and
artifacts each system fetches itself (jars from Maven Central, Go modules) into the cache,
and the lazy filesystem of the power-loss fault (built with Go)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable

from brokers import lazyfs, registry
from brokers.errors import BrokerError


def _installed(package: str) -> bool:
    done = subprocess.run(
        ["dpkg-query", "-W", "-f=${Status}", package], capture_output=True, text=True, check=False
    )
    return done.returncode == 0 and "install ok installed" in done.stdout


def setup(systems: list[str], console: Callable[[str], None] = print) -> int:
    chosen = [registry.get(name) for name in systems]
    packages = sorted({p for s in chosen if s.local for p in s.local.debian_packages})
    missing = [p for p in packages if shutil.which("dpkg-query") and not _installed(p)]
    if missing:
        if os.geteuid() != 0:
            console(f"please install: sudo apt-get install -y {' '.join(missing)}")
            return 1
        console(f"installing Debian packages: {' '.join(missing)}")
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update", "-qq"], check=False, env=env)
        done = subprocess.run(["apt-get", "install", "-y", "-qq", *missing], check=False, env=env)
        if done.returncode != 0:
            console(f"apt-get install failed for: {' '.join(missing)}")
            return 1
    failed = 0
    for system in chosen:
        if system.local is None:
            continue
        try:
            system.local.install(console)
        except BrokerError as exc:
            console(f"{system.name}: {exc}")
            failed += 1
        reason = system.local.missing()
        console(f"{system.name}: {reason if reason else 'ready'}")
    if not lazyfs.install(console):
        failed += 1
    return 1 if failed else 0
