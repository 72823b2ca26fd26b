"""The scenario file format: TOML parsed once into strict pydantic models.

Unknown or misspelt keys are rejected; each problem becomes one line naming the file, the
key path and, where it can be found, the line. Broker parameters are validated against the
chosen system's own model from the registry. Everything past :func:`load_scenario` works
on these models, never on raw dicts.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PositiveInt,
    ValidationError,
    field_validator,
    model_validator,
)

from brokers import registry
from brokers.base import BrokerParams, Endpoints
from workload.errors import ScenarioError
from workload.message import HEADER_MAX

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|min|m|h)?\s*$")


def parse_duration(value: Any) -> Any:
    """``"90s"``, ``"2m"``, ``"500ms"`` or a plain number of seconds → seconds (float)."""
    if isinstance(value, bool):
        raise ValueError('expected a duration such as 30 or "30s"')
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        match = _DURATION.match(value)
        if match:
            return float(match.group(1)) * _UNITS[match.group(2) or "s"]
    raise ValueError(f'{value!r} is not a duration (use e.g. 30, "30s", "2m", "500ms")')


Duration = Annotated[float, BeforeValidator(parse_duration), Field(ge=0)]
PositiveDuration = Annotated[float, BeforeValidator(parse_duration), Field(gt=0)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class BrokerSection(Strict):
    """Which system, how it is deployed, and its parameters."""

    system: str = Field(description="Broker system name, see `brokerbench brokers`.")
    deployment: Literal["local", "endpoints"] = Field(
        "local",
        description="'local': brokerbench starts the broker here; 'endpoints': use a running one.",
    )
    topology: str = Field(
        "single", description="Local topology, e.g. 'single' or 'cluster' (see the system)."
    )
    endpoints: list[str] = Field(
        default_factory=list, description="host:port of each node, with deployment = 'endpoints'."
    )
    options: dict[str, str] = Field(
        default_factory=dict,
        description="Connection extras for deployment = 'endpoints' (e.g. user, dbname).",
    )
    params: dict[str, Any] = Field(
        default_factory=dict, description="System parameters, checked against the system's model."
    )

    @field_validator("system")
    @classmethod
    def _known_system(cls, value: str) -> str:
        try:
            registry.get(value)
        except registry.UnknownSystem as exc:
            raise ValueError(str(exc)) from None
        return value

    @field_validator("endpoints")
    @classmethod
    def _host_port(cls, value: list[str]) -> list[str]:
        for item in value:
            host, sep, port = item.rpartition(":")
            if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise ValueError(f"{item!r} is not host:port")
        return value

    @model_validator(mode="after")
    def _deployment_fits(self) -> BrokerSection:
        if self.deployment == "endpoints" and not self.endpoints:
            raise ValueError("deployment = 'endpoints' needs endpoints = [\"host:port\", …]")
        if self.deployment == "local" and self.endpoints:
            raise ValueError("endpoints are only used with deployment = 'endpoints'")
        system = registry.get(self.system)
        if self.deployment == "local":
            if system.local is None:
                raise ValueError(
                    f"{self.system} cannot be started locally; use deployment = 'endpoints'"
                )
            if self.topology not in system.local.topologies:
                raise ValueError(
                    f"topology {self.topology!r} is not one of {', '.join(system.local.topologies)}"
                )
        return self

    def given_endpoints(self) -> Endpoints:
        return Endpoints(hosts=tuple(self.endpoints), extra=tuple(sorted(self.options.items())))


class LoadSection(Strict):
    """Client-side load (SPEC §2); the defaults are the reference study's."""

    threads: PositiveInt = Field(1, description="Workers per client node.")
    sender_nodes: PositiveInt = Field(1, description="Sender node processes (machines on AWS).")
    receiver_nodes: PositiveInt | None = Field(
        None, description="Receiver node processes; default twice the sender nodes."
    )
    message_size: int = Field(100, ge=HEADER_MAX, le=16 * 1024 * 1024, description="Bytes.")
    max_send_batch: PositiveInt = Field(10, description="Send batch size is uniform in [1, this].")
    receive_batch: PositiveInt = Field(10, description="max_n of each receive call.")
    pool_size: PositiveInt = Field(10_000, description="Random payloads generated at start-up.")
    duration: PositiveDuration = Field(60.0, description="How long senders send.")
    messages: PositiveInt | None = Field(
        None, description="Stop a sender worker after this many messages (before duration ends)."
    )
    rate: float | None = Field(
        None, gt=0, description="Target msgs/s per sender worker (open loop); unset = closed loop."
    )
    max_in_flight: int = Field(
        1,
        ge=1,
        le=1000,
        description="Batches a sender worker may have awaiting confirmation: 1 waits for each "
        "batch before the next (SPEC §2); a message counts as sent only once confirmed.",
    )
    processes: int | None = Field(
        None,
        ge=1,
        le=1024,
        description="Processes a client node spreads its workers over; default one per CPU "
        "core of the node, at most `threads`.",
    )
    idle_timeout: PositiveDuration = Field(
        60.0, description="A receiver stops when nothing arrived for this long."
    )
    failure_timeout: PositiveDuration = Field(
        20.0, description="A worker gives up after failing continuously for this long."
    )


class MeasurementSection(Strict):
    """How the per-second records become headline numbers (SPEC §3)."""

    warmup: Duration | None = Field(
        None,
        description="Seconds at the start of each point that are recorded but left out of "
        "headline figures and whole-run percentiles; default 10 s (a fifth of load.duration "
        "when that is under 50 s).",
    )
    window: PositiveDuration = Field(60.0, description="Latency window length.")
    step: PositiveDuration = Field(10.0, description="Window slide step.")


def default_warmup(duration: float) -> float:
    """10 s, or a fifth of a run shorter than 50 s."""
    return min(10.0, duration / 5)


SWEEPABLE = ("threads", "sender_nodes", "receiver_nodes", "message_size")


class SweepPointSpec(Strict):
    """One explicit point of ``[[sweep.points]]``."""

    threads: PositiveInt | None = None
    sender_nodes: PositiveInt | None = None
    receiver_nodes: PositiveInt | None = None
    message_size: int | None = Field(None, ge=HEADER_MAX)
    params: dict[str, Any] = Field(default_factory=dict)


class SweepSection(Strict):
    """Values to sweep: their cartesian product, or an explicit list of points."""

    threads: list[PositiveInt] | None = None
    sender_nodes: list[PositiveInt] | None = None
    receiver_nodes: list[PositiveInt] | None = None
    message_size: list[Annotated[int, Field(ge=HEADER_MAX)]] | None = None
    params: dict[str, list[Any]] = Field(default_factory=dict)
    points: list[SweepPointSpec] = Field(default_factory=list)

    @model_validator(mode="after")
    def _one_style(self) -> SweepSection:
        lists = [k for k in SWEEPABLE if getattr(self, k) is not None] + list(self.params)
        if self.points and lists:
            raise ValueError("use either value lists or [[sweep.points]], not both")
        for key in lists:
            values = self.params[key] if key in self.params else getattr(self, key)
            if not values:
                raise ValueError(f"{key}: the list of values is empty")
        return self


class Scenario(Strict):
    """A whole scenario file."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", description="Used in run ids.")
    description: str = ""
    broker: BrokerSection
    load: LoadSection = Field(default_factory=LoadSection)  # type: ignore[arg-type]
    measurement: MeasurementSection = Field(default_factory=MeasurementSection)  # type: ignore[arg-type]
    sweep: SweepSection = Field(default_factory=SweepSection)

    @model_validator(mode="after")
    def _resolve(self) -> Scenario:
        duration = self.load.duration
        warmup = self.measurement.warmup
        if warmup is None:
            resolved = self.measurement.model_copy(update={"warmup": default_warmup(duration)})
            object.__setattr__(self, "measurement", resolved)  # frozen: resolved once, here
        elif warmup >= duration:
            raise ValueError(
                f"measurement.warmup ({warmup:g} s) must be shorter than load.duration "
                f"({duration:g} s)"
            )
        system = registry.get(self.broker.system)
        if self.load.max_in_flight > 1 and not system.can_pipeline:
            raise ValueError(
                f"load.max_in_flight: {system.title}'s adapter confirms each batch before "
                "the next; only 1 is possible"
            )
        return self

    def broker_params(self, overrides: dict[str, Any] | None = None) -> BrokerParams:
        """The system's typed parameters, with a sweep point's overrides applied."""
        model = registry.get(self.broker.system).params_model
        return model.model_validate({**self.broker.params, **(overrides or {})})


def load_scenario(path: str | Path) -> Scenario:
    """Read, parse and validate one scenario file, or raise :class:`ScenarioError`."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ScenarioError([f"{path}: no such file"]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ScenarioError([f"{path}: cannot read: {exc}"]) from None
    if not text.strip():
        raise ScenarioError(
            [f"{path}: the file is empty; a scenario needs at least name and [broker]"]
        )
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError([f"{path}: not valid TOML: {exc}"]) from None
    return parse_scenario(data, str(path), text)


def parse_scenario(data: dict[str, Any], source: str = "<scenario>", text: str = "") -> Scenario:
    """Validate already-parsed TOML data (``source`` and ``text`` only improve messages)."""
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as exc:
        raise ScenarioError(_lines(exc, source, text)) from None
    try:
        _check_params(scenario)
    except ValidationError as exc:
        raise ScenarioError(_lines(exc, source, text, prefix=("broker", "params"))) from None
    return scenario


def _check_params(scenario: Scenario) -> None:
    """Validate ``[broker.params]`` and every swept parameter value against the system."""
    scenario.broker_params()
    model = registry.get(scenario.broker.system).params_model
    for key, values in scenario.sweep.params.items():
        for value in values:
            model.model_validate({**scenario.broker.params, key: value})
    for point in scenario.sweep.points:
        scenario.broker_params(point.params)


def _lines(
    exc: ValidationError, source: str, text: str, prefix: tuple[str | int, ...] = ()
) -> list[str]:
    lines = []
    for error in exc.errors():
        loc = tuple(prefix) + tuple(error["loc"])
        key = ".".join(str(part) for part in loc) or "(top level)"
        message = error["msg"]
        if error["type"] == "extra_forbidden":
            message = "unknown key (misspelt?)"
        elif error["type"] == "missing":
            message = "required key is missing"
        message = message.removeprefix("Value error, ")
        line = _line_of(text, [p for p in loc if isinstance(p, str)])
        where = f" (line {line})" if line else ""
        lines.append(f"{source}: {key}: {message}{where}")
    return lines


def _line_of(text: str, path: list[str]) -> int | None:
    """Best-effort line number of a dotted key in TOML text (tables, dotted keys, inline keys)."""
    if not text or not path:
        return None
    table: list[str] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if line.startswith("["):
            table = [p.strip().strip('"') for p in line.strip("[]").split(".")]
            if table == path:
                return number
            continue
        key = line.split("=", 1)[0].strip().strip('"') if "=" in line else ""
        if not key:
            continue
        full = table + [p.strip().strip('"') for p in key.split(".")]
        if (
            full == path[: len(full)]
            and len(full) <= len(path)
            and (full == path or re.search(rf"\b{re.escape(path[-1])}\s*=", line))
        ):
            return number
    return None
