"""The manifest of an AWS run: what a stack deployed, written by the Pulumi program
(:mod:`infra.machines`) as ``runs/<run-id>/manifest.json``, beside the run's results (the
next run's ``up`` leaves it), and read by the ``cloud`` commands
(:mod:`workload.shell.cloud_status`, :mod:`workload.shell.cloud_analyze`) and by whoever
fetches a run (``cloud-manifest.json``).

The stack writes every field; a reader takes what a manifest lacks from the defaults, so
that a hand-written one (or one of an older version) still names its sweep points.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from workload.model.sweep import SweepPoint


class ManifestPart(BaseModel):
    """A part of the manifest: frozen, unknown keys ignored."""

    model_config = ConfigDict(frozen=True, extra="ignore")


class ManifestPoint(ManifestPart):
    """One sweep point as the fleet runs it: how many client machines of each role take part."""

    index: int
    senders: int
    receivers: int
    label: str = ""

    @classmethod
    def of(cls, point: SweepPoint) -> ManifestPoint:
        return cls(
            index=point.index,
            senders=point.load.sender_nodes,
            receivers=point.receiver_nodes,
            label=point.label,
        )


class ManifestNode(ManifestPart):
    """A machine of the stack: its role, index within the role and private address."""

    role: str
    index: int
    address: str


class ManifestVolume(ManifestPart):
    """The data volume of every broker machine."""

    gib: int = 0
    type: str = ""


class ManifestEndpoints(ManifestPart):
    """Where the clients connect, with the connection's extras."""

    hosts: list[str] = Field(default_factory=list)
    extra: dict[str, str] = Field(default_factory=dict)


class ManifestSource(ManifestPart):
    """The code a run deployed: its commit, and whether the tree differed from it."""

    #: The commit the wheel was built from ("" when unknown: no git checkout).
    commit: str = ""
    #: The tree had changes not in the commit (deployed with ``brokerbench:allowDirty``).
    dirty: bool = False


class RunManifest(ManifestPart):
    """What a stack deployed for one run (see the module)."""

    run_id: str = ""
    stack: str = ""
    system: str = ""
    title: str = ""
    scenario: str = ""
    scenario_file: str = ""
    region: str = ""
    bucket: str = ""
    run_prefix: str = ""
    #: The broker nodes by role.
    topology: dict[str, int] = Field(default_factory=dict)
    replication: str = ""
    caveats: list[str] = Field(default_factory=list)
    broker_instance_type: str = ""
    client_instance_type: str = ""
    data_volume: ManifestVolume = Field(default_factory=ManifestVolume)
    brokers: list[ManifestNode] = Field(default_factory=list)
    clients: list[ManifestNode] = Field(default_factory=list)
    points: list[ManifestPoint]
    endpoints: ManifestEndpoints = Field(default_factory=ManifestEndpoints)
    #: The interpreter of the analysis job on EMR (the stack's ``emrPython``).
    emr_python: str = ""
    #: The S3 key of the analysis job's packed Python environment ("" with none: then the
    #: application's custom image runs the job on ``emr_python``).
    emr_environment: str = ""
    #: Hours after boot when every machine of the stack stops itself; 0: never.
    ttl_hours: int = 0
    source: ManifestSource = Field(default_factory=ManifestSource)
    #: The stack's settings as deployed (its ``brokerbench:*`` keys, camelCase): not code,
    #: so they never make ``source`` dirty.
    settings: dict[str, Any] = Field(default_factory=dict)
    #: A digest of what the run's machines run (scenario, settings, code): a second ``up``
    #: of the same run id with another one is refused once the run has begun.
    fingerprint: str = ""
    #: What the client machines install (distribution → version: the stack's lock).
    client_versions: dict[str, str] = Field(default_factory=dict)
    #: How the broker machines install the broker: the recipe's commands, which pin it.
    broker_install: list[str] = Field(default_factory=list)

    def to_json(self) -> str:
        """The manifest as the stack uploads it."""
        return json.dumps(self.model_dump(), indent=1, sort_keys=True)
