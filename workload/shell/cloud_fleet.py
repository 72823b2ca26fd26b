"""The machines of AWS runs as the ``cloud`` commands find them: by the tags every resource
of a run carries (its stack and its run id: :data:`infra.settings.STACK_TAG`,
:data:`infra.settings.RUN_TAG`), and the AWS calls they make, each failure one line."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from infra.settings import RUN_TAG, STACK_TAG
from workload.model.errors import UserError, one_line

#: Instance states of a machine that still runs (and costs its hourly price).
RUNNING = ("pending", "running")


class CloudFailed(UserError):
    """An AWS call failed: one line, exit 1."""

    exit_code = 1


def aws_call(what: str, call: Any, **kwargs: Any) -> Any:
    """``call(**kwargs)``; a missing credential or a refused call as one line."""
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

    try:
        return call(**kwargs)
    except NoCredentialsError:
        raise UserError(
            f"{what}: no AWS credentials (set AWS_PROFILE, or run aws configure)"
        ) from None
    except (BotoCoreError, ClientError) as exc:
        raise CloudFailed(f"{what}: {one_line(str(exc))}") from None


@dataclass(frozen=True)
class Machine:
    """One instance of a run: its id, run, state and name (``brokers-broker-0``)."""

    id: str
    run: str
    state: str
    name: str = ""


def machines(
    ec2: Any, stack: str | None = None, run: str | None = None, states: tuple[str, ...] = ()
) -> list[Machine]:
    """The instances tagged with ``stack`` and ``run`` (either may be left out), in
    ``states`` (all when empty), sorted by run and id."""
    filters = [
        {"Name": f"tag:{key}", "Values": [value]}
        for key, value in ((STACK_TAG, stack), (RUN_TAG, run))
        if value
    ]
    if states:
        filters.append({"Name": "instance-state-name", "Values": list(states)})
    pages = ec2.get_paginator("describe_instances").paginate(Filters=filters)
    found = aws_call("describe the machines", lambda: list(pages))
    listed = []
    for instance in (i for page in found for r in page["Reservations"] for i in r["Instances"]):
        tags = {t["Key"]: t["Value"] for t in instance.get("Tags", [])}
        listed.append(
            Machine(
                instance["InstanceId"],
                tags.get(RUN_TAG, ""),
                instance["State"]["Name"],
                tags.get("Name", ""),
            )
        )
    return sorted(listed, key=lambda m: (m.run, m.id))


def by_run(found: list[Machine]) -> dict[str, list[Machine]]:
    """The machines grouped by their run (``""``: untagged, an older stack's)."""
    runs: dict[str, list[Machine]] = {}
    for machine in found:
        runs.setdefault(machine.run, []).append(machine)
    return runs


def fleet_line(found: list[Machine]) -> tuple[str, bool]:
    """How a run's machines stand, in one line, and whether they have all stopped."""
    if not found:
        return "machines: none found with the run's tag (destroyed, or no access)", False
    counts = Counter(m.state for m in found)
    stopped = not any(counts[s] for s in RUNNING)
    states = ", ".join(f"{n} {state}" for state, n in sorted(counts.items()))
    return f"machines: {states}" + (" — the fleet has stopped" if stopped else ""), stopped
