"""The one place that maps a system name to its :class:`~brokers.base.BrokerSystem`.

Every sub-package of ``brokers`` that exports ``SYSTEM`` is a system; adding a broker is
adding a folder. Nothing outside ``brokers/`` knows a broker by name.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache
from typing import Any

import brokers
from brokers.base import BrokerSystem


class UnknownSystem(LookupError):
    def __init__(self, name: str, known: list[str]) -> None:
        super().__init__(f"unknown broker system {name!r}; known: {', '.join(known)}")


@cache
def systems() -> dict[str, BrokerSystem[Any]]:
    """All systems, by name, in alphabetical order."""
    found: dict[str, BrokerSystem[Any]] = {}
    for info in pkgutil.iter_modules(brokers.__path__):
        if not info.ispkg:
            continue
        module = importlib.import_module(f"brokers.{info.name}")
        system = getattr(module, "SYSTEM", None)
        if isinstance(system, BrokerSystem):
            found[system.name] = system
    return dict(sorted(found.items()))


def get(name: str) -> BrokerSystem[Any]:
    try:
        return systems()[name]
    except KeyError:
        raise UnknownSystem(name, list(systems())) from None
