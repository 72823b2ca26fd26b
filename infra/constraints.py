"""The exact versions client machines install: a pip constraints file the stack uploads.

Client machines install the brokerbench wheel with its ``brokers`` extra from PyPI at boot
(``pip install -c constraints.txt '<wheel>[brokers]'``). :func:`client_constraints` pins
every distribution of that install to the version installed in this environment, the one
that runs ``pulumi up``: it starts from the requirements ``pyproject.toml`` declares (the
base dependencies and the client extras — not ``analysis``, ``aws`` or ``dev``, so neither
PySpark nor Pulumi) and follows each installed distribution's own requirements. Environment
markers are evaluated for the client machines (:data:`CLIENT_ENVIRONMENT`), not for this
machine, which may be another platform or Python. A requirement the clients need that this
environment lacks, or has at a version the requirement does not allow, is left unpinned and
named in a comment line of the file.

What a stack uploads is not this environment's, though, but the committed lock
(:data:`LOCK`, :func:`read_lock`): the pins of the environment the test suite runs in, which
a test holds equal to it (``python -m infra.constraints > infra/clients.lock`` writes it
anew). So client machines install exactly the versions CI tested, whoever deploys, and a
run's manifest records them.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from infra.settings import ROOT

#: The client machines' versions, as the test suite's environment pins them.
LOCK = ROOT / "infra" / "clients.lock"
_UNPINNED = "# not pinned: "
#: The extras of brokerbench a client machine installs.
CLIENT_EXTRAS = ("brokers",)
#: The client machines' platform and interpreter, for environment markers: Debian 12 on
#: x86_64 (the image ``infra.program`` selects) and its ``python3``.
CLIENT_ENVIRONMENT = {
    "os_name": "posix",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "platform_machine": "x86_64",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
    "python_version": "3.11",
    "python_full_version": "3.11.2",
}


@dataclass(frozen=True)
class Constraints:
    """Pinned versions, and the client requirements that could not be pinned (and why)."""

    #: Canonical distribution name → the version installed here.
    pins: dict[str, str]
    #: Canonical distribution name → why it is not pinned.
    unpinned: dict[str, str]

    def text(self) -> str:
        """The constraints file: one ``name==version`` line per pin, sorted by name."""
        lines = [
            "# The versions client machines install the brokerbench wheel at (pip install -c",
            "# <this file>): the test suite's environment's, infra/clients.lock.",
            *(f"{name}=={version}" for name, version in sorted(self.pins.items())),
            *(f"{_UNPINNED}{name}: {why}" for name, why in sorted(self.unpinned.items())),
        ]
        return "\n".join(lines) + "\n"


def client_constraints(
    pyproject: Path = ROOT / "pyproject.toml",
    extras: Iterable[str] = CLIENT_EXTRAS,
    environment: Mapping[str, str] = CLIENT_ENVIRONMENT,
    more: Iterable[str] = (),
) -> Constraints:
    """Pins for the whole install of the project with ``extras`` (and the requirements
    ``more``) on the client machines, or on the platform ``environment`` describes."""
    project = tomllib.loads(pyproject.read_text())["project"]
    optional = project.get("optional-dependencies", {})
    declared = [
        *project.get("dependencies", []),
        *(r for e in extras for r in optional[e]),
        *more,
    ]
    pending = [
        (requirement, str(project["name"]))
        for requirement in map(Requirement, declared)
        if _applies(requirement, (), environment)
    ]
    pins: dict[str, str] = {}
    unpinned: dict[str, str] = {}
    expanded: dict[str, set[str]] = {}
    while pending:
        requirement, wanted_by = pending.pop()
        name = canonicalize_name(requirement.name)
        try:
            distribution = metadata.distribution(requirement.name)
        except metadata.PackageNotFoundError:
            unpinned.setdefault(name, f"not installed here (required by {wanted_by})")
            continue
        version = distribution.version
        if not requirement.specifier.contains(version, prereleases=True):
            unpinned[name] = f"{version} is installed here, but {wanted_by} requires {requirement}"
            continue
        pins[name] = version
        done = expanded.get(name)
        if done is not None and set(requirement.extras) <= done:
            continue
        extras_now = expanded.setdefault(name, set())
        extras_now.update(requirement.extras)
        pending.extend(
            (dependency, name)
            for dependency in map(Requirement, distribution.requires or [])
            if _applies(dependency, extras_now, environment)
        )
    return Constraints(
        pins={name: version for name, version in pins.items() if name not in unpinned},
        unpinned=unpinned,
    )


def _applies(
    requirement: Requirement, extras: Iterable[str], environment: Mapping[str, str]
) -> bool:
    """Whether ``requirement`` holds on the clients for a distribution wanted with ``extras``."""
    marker = requirement.marker
    return marker is None or any(
        marker.evaluate({**environment, "extra": extra}) for extra in ("", *extras)
    )


def read_lock(path: Path = LOCK) -> Constraints:
    """The committed lock (:meth:`Constraints.text`'s form) as constraints."""
    pins: dict[str, str] = {}
    unpinned: dict[str, str] = {}
    for line in path.read_text().splitlines():
        if line.startswith(_UNPINNED):
            name, _, why = line.removeprefix(_UNPINNED).partition(": ")
            unpinned[name] = why
        elif line.strip() and not line.startswith("#"):
            name, _, version = line.partition("==")
            pins[name.strip()] = version.strip()
    return Constraints(pins, unpinned)


if __name__ == "__main__":
    print(client_constraints().text(), end="")
