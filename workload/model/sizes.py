"""A scenario's message sizes (``load.message_size``): a fixed number of bytes, as
``message_size = 100``, or a distribution, as a table whose ``kind`` says which:

``fixed``
    ``size``: every message that many bytes;
``uniform``
    ``min`` and ``max``: sizes uniform over the integers from ``min`` to ``max``;
``weighted``
    ``sizes`` and ``weights`` (lists of the same length): each size with its weight's share;
``lognormal``
    ``mean`` and ``p99``: the log-normal distribution with that mean and 99th percentile (the
    one of the two with the smaller spread), drawn sizes below ``min`` (default the header's
    72 bytes) or above ``max`` (default 10 × ``p99``, at most 16 MiB) taken as ``min`` and
    ``max``.

Every size lies between the identity header (:data:`~workload.model.bounds.HEADER_MAX`) and
16 MiB. :meth:`SizeDistribution.draw` draws sizes with a seeded generator: a client
process draws one per payload of its pool (:mod:`workload.engine.message`), and a sender picks a
payload of the pool per message, so messages take the pool's sizes.
"""

from __future__ import annotations

import math
import random
from statistics import NormalDist
from typing import Annotated, Any, Literal

from pydantic import Field, model_serializer, model_validator

from workload.model.bounds import HEADER_MAX, MAX_MESSAGE_SIZE, MIB, MessageSize, Strict
from workload.model.errors import conflict

#: At most this many sizes in a weighted distribution.
MAX_WEIGHTED = 100
#: The largest weight (weights are relative: only their shares count).
MAX_WEIGHT = 1e9
#: Where a log-normal distribution's draws are capped by default: this many times its p99.
LOGNORMAL_CAP = 10
#: The 99th percentile of the standard normal distribution.
Z99 = NormalDist().inv_cdf(0.99)
#: The largest p99 ÷ mean a log-normal distribution has (its spread is then Z99).
MAX_P99_RATIO = math.exp(Z99 * Z99 / 2)

Kind = Literal["fixed", "uniform", "weighted", "lognormal"]
#: The keys each kind takes (all required but a log-normal's min and max).
KEYS: dict[str, tuple[str, ...]] = {
    "fixed": ("size",),
    "uniform": ("min", "max"),
    "weighted": ("sizes", "weights"),
    "lognormal": ("mean", "p99", "min", "max"),
}
OPTIONAL = {"lognormal": ("min", "max")}
Bytes = Annotated[float, Field(ge=HEADER_MAX, le=MAX_MESSAGE_SIZE, allow_inf_nan=False)]
Weight = Annotated[float, Field(gt=0, le=MAX_WEIGHT, allow_inf_nan=False)]


class SizeDistribution(Strict):
    """``load.message_size`` as a table: how the sizes of messages are distributed
    (module docstring). A fixed size is written as a number and kept as ``kind = "fixed"``;
    the run record writes it back as a number."""

    kind: Kind = Field(
        description='"fixed" (size), "uniform" (min, max), "weighted" (sizes, weights) or '
        '"lognormal" (mean, p99; optionally min, max).'
    )
    size: MessageSize | None = Field(None, description="fixed: bytes of every message.")
    min: MessageSize | None = Field(
        None,
        description="uniform: the smallest size; lognormal: draws below it are taken as it "
        "(default 72, the header).",
    )
    max: MessageSize | None = Field(
        None,
        description="uniform: the largest size; lognormal: draws above it are taken as it "
        "(default 10 × p99, at most 16 MiB).",
    )
    sizes: list[MessageSize] | None = Field(
        None, min_length=1, max_length=MAX_WEIGHTED, description="weighted: the sizes, each once."
    )
    weights: list[Weight] | None = Field(
        None,
        min_length=1,
        max_length=MAX_WEIGHTED,
        description="weighted: each size's relative weight (positive).",
    )
    mean: Bytes | None = Field(None, description="lognormal: the mean size in bytes.")
    p99: Bytes | None = Field(
        None,
        description="lognormal: the 99th percentile in bytes; above the mean and at most "
        f"{MAX_P99_RATIO:.2f} × it (the largest ratio a log-normal distribution has).",
    )

    @model_validator(mode="after")
    def _fits_its_kind(self) -> SizeDistribution:
        takes = KEYS[self.kind]
        given = [
            k
            for k in ("size", "min", "max", "sizes", "weights", "mean", "p99")
            if getattr(self, k) is not None
        ]
        stray = [k for k in given if k not in takes]
        if stray:
            raise conflict(
                (stray[0],),
                f'kind = "{self.kind}" takes {_and(takes)}, not {_and(stray)}',
            )
        missing = [k for k in takes if k not in given and k not in OPTIONAL.get(self.kind, ())]
        if missing:
            # Reported at kind; the missing keys are named too, so that a check that left
            # a wrong one out does not report it missing.
            raise conflict(("kind", *missing), f'kind = "{self.kind}" needs {_and(missing)}')
        if self.kind == "uniform":
            assert self.min is not None and self.max is not None
            if self.min > self.max:
                raise conflict(("min", "max"), f"min ({self.min}) is above max ({self.max})")
        elif self.kind == "weighted":
            assert self.sizes is not None and self.weights is not None
            if len(self.weights) != len(self.sizes):
                raise conflict(
                    ("weights", "sizes"),
                    f"{len(self.weights)} weight(s) for {len(self.sizes)} size(s): give one "
                    "weight per size",
                )
            repeated = sorted({s for s in self.sizes if self.sizes.count(s) > 1})
            if repeated:
                raise conflict(("sizes",), f"{repeated[0]} is given twice: give each size once")
        elif self.kind == "lognormal":
            self._check_lognormal()
        return self

    def _check_lognormal(self) -> None:
        assert self.mean is not None and self.p99 is not None
        if not self.mean < self.p99 <= self.mean * MAX_P99_RATIO:
            raise conflict(
                ("p99",),
                f"p99 ({self.p99:g}) must be above the mean ({self.mean:g}) and at most "
                f"{MAX_P99_RATIO:.2f} × it ({self.mean * MAX_P99_RATIO:,.0f}): no log-normal "
                "distribution has these",
            )
        low, high = self.min or HEADER_MAX, self.upper
        if not low <= self.mean <= high:
            raise conflict(
                ("mean",), f"the mean ({self.mean:g}) lies outside min..max ({low}..{high})"
            )
        if self.p99 > high:
            raise conflict(("max",), f"max ({high}) is below p99 ({self.p99:g})")

    @model_serializer(mode="wrap")
    def _as_written(self, handler: Any) -> Any:
        """A fixed size as its number; a distribution with the keys it takes."""
        if self.kind == "fixed":
            return self.size
        return {k: v for k, v in handler(self).items() if v is not None}

    @classmethod
    def of(cls, value: Any) -> Any:
        """``message_size`` as written: a number of bytes is a fixed size (checked here, so
        that its problem is reported at ``message_size``); a table is read as it is."""
        if isinstance(value, bool) or (not isinstance(value, int | dict | SizeDistribution)):
            kind = next((k for t, k in _TOML_KINDS if isinstance(value, t)), type(value).__name__)
            raise ValueError(
                f'expected bytes (an integer) or a table with kind = "fixed", "uniform", '
                f'"weighted" or "lognormal" (got {kind})'
            )
        if isinstance(value, int):
            if not HEADER_MAX <= value <= MAX_MESSAGE_SIZE:
                raise ValueError(
                    f"{value} bytes: a message is from {HEADER_MAX} bytes (its identity "
                    f"header) to {MAX_MESSAGE_SIZE} bytes ({MAX_MESSAGE_SIZE // MIB} MiB)"
                )
            return cls.model_validate({"kind": "fixed", "size": value})
        return value

    @property
    def fixed(self) -> int | None:
        """Bytes of every message (None: a distribution)."""
        return self.size if self.kind == "fixed" else None

    @property
    def upper(self) -> int:
        """The largest size a message may have."""
        if self.kind == "fixed":
            assert self.size is not None
            return self.size
        if self.kind == "weighted":
            assert self.sizes is not None
            return max(self.sizes)
        if self.kind == "lognormal" and self.max is None:
            assert self.p99 is not None
            return min(MAX_MESSAGE_SIZE, math.ceil(LOGNORMAL_CAP * self.p99))
        assert self.max is not None
        return self.max

    @property
    def average(self) -> float:
        """The mean size of the distribution (a log-normal one's before its draws are
        taken into min..max)."""
        if self.kind == "uniform":
            assert self.min is not None and self.max is not None
            return (self.min + self.max) / 2
        if self.kind == "weighted":
            assert self.sizes is not None and self.weights is not None
            total = sum(self.weights)
            return sum(s * w for s, w in zip(self.sizes, self.weights, strict=True)) / total
        if self.kind == "lognormal":
            assert self.mean is not None
            return self.mean
        return float(self.upper)

    @property
    def label(self) -> str:
        """The sizes in a few words: ``100``, ``uniform 100–1000``, ``weighted 100:3 1000:1``,
        ``lognormal mean 1000 p99 8000``."""
        if self.kind == "fixed":
            return str(self.size)
        if self.kind == "uniform":
            return f"uniform {self.min}–{self.max}"
        if self.kind == "weighted":
            assert self.sizes is not None and self.weights is not None
            pairs = " ".join(f"{s}:{w:g}" for s, w in zip(self.sizes, self.weights, strict=True))
            return f"weighted {pairs}"
        bounds = (
            ""
            if self.min is None and self.max is None
            else f" in {self.min or HEADER_MAX}–{self.upper}"
        )
        return f"lognormal mean {self.mean:g} p99 {self.p99:g}{bounds}"

    def lognormal_params(self) -> tuple[float, float]:
        """(mu, sigma) of the log-normal distribution with this mean and p99: of the two
        spreads that give them, the smaller."""
        assert self.mean is not None and self.p99 is not None
        sigma = Z99 - math.sqrt(max(0.0, Z99 * Z99 - 2 * math.log(self.p99 / self.mean)))
        return math.log(self.mean) - sigma * sigma / 2, sigma

    def draw(self, count: int, seed: int | None = None) -> list[int]:
        """``count`` sizes drawn with a generator seeded with ``seed``."""
        rng = random.Random(seed)
        if self.kind == "fixed":
            assert self.size is not None
            return [self.size] * count
        if self.kind == "uniform":
            assert self.min is not None and self.max is not None
            return [rng.randint(self.min, self.max) for _ in range(count)]
        if self.kind == "weighted":
            assert self.sizes is not None and self.weights is not None
            return rng.choices(self.sizes, self.weights, k=count)
        mu, sigma = self.lognormal_params()
        low, high = self.min or HEADER_MAX, self.upper
        return [min(high, max(low, round(rng.lognormvariate(mu, sigma)))) for _ in range(count)]


_TOML_KINDS: tuple[tuple[type, str], ...] = (
    (bool, "a boolean"),
    (float, "a float"),
    (str, "a string"),
    (list, "an array"),
)


def size_schema(schema: dict[str, Any]) -> None:
    """``message_size``'s JSON schema: a number of bytes, or a distribution's table."""
    ref = schema.pop("$ref")
    schema["anyOf"] = [
        {"type": "integer", "minimum": HEADER_MAX, "maximum": MAX_MESSAGE_SIZE},
        {"$ref": ref},
    ]


def _and(keys: tuple[str, ...] | list[str]) -> str:
    return " and ".join(", ".join(keys).rsplit(", ", 1)) if len(keys) > 1 else keys[0]
