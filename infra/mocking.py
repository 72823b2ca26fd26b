"""Deploying a stack under Pulumi's unit-test mocks: no cloud, every declared resource kept.

:func:`deploy` runs :func:`infra.program.build` (or any program function) with mocks that
answer like AWS would in the ways the program relies on (bucket names, ARNs, the names and
URLs of managed services, Elastic IP allocation ids, the availability zones, the instance
types each zone offers, what the results bucket holds) and returns the
:class:`~infra.checks.Declared` resources with their resolved inputs, ready for the
validators in :mod:`infra.checks`.
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
from collections.abc import Callable
from typing import Any

import pulumi
from pulumi.runtime.mocks import MockMonitor

from infra.checks import Declared, Options
from infra.queue import RESOURCES

ZONES = ["eu-west-1a", "eu-west-1b", "eu-west-1c"]
#: The machine image the tests pin (``brokerbench:ami``).
AMI = "ami-0debian12mock"
ACCOUNT = "123456789012"


class RecordingMocks(pulumi.runtime.Mocks):
    def __init__(
        self,
        region: str = "eu-west-1",
        objects: dict[str, str] | None = None,
        offerings: dict[str, set[str]] | None = None,
    ) -> None:
        self.region = region
        #: What the results bucket holds (key → text), for the program's look-ups in it.
        self.objects = dict(objects or {})
        #: Zone → the instance types it offers (None: every type in every zone).
        self.offerings = offerings
        self.declared: list[Declared] = []
        self.calls: list[tuple[str, dict[str, Any]]] = []
        #: The options of the resource being registered on this thread (:class:`OptionsMonitor`).
        self.registering = threading.local()

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        kind = args.typ.split(":")[-1]
        state: dict[str, Any] = dict(args.inputs)
        resource_id = f"{args.name}-id"
        if args.typ == "aws:s3/bucket:Bucket":
            resource_id = state.get("bucket") or f"{args.name}-4f3c2a1"
            state["bucket"] = resource_id
            state["arn"] = f"arn:aws:s3:::{resource_id}"
        elif args.typ in RESOURCES:  # a managed service: named by AWS, at the service's URL
            service = args.typ.split(":")[1].split("/")[0]
            name = state.get("name") or f"{args.name}-7d1e9b0"
            state.update(
                name=name,
                arn=f"arn:aws:{service}:{self.region}:{ACCOUNT}:{name}",
                url=f"https://{service}.{self.region}.amazonaws.com/{ACCOUNT}/{name}",
            )
        elif args.typ == "random:index/randomPassword:RandomPassword":
            digest = hashlib.sha256(args.name.encode()).hexdigest()
            state["result"] = ("MockSecret" + digest)[: int(state.get("length") or 32)]
        elif args.typ == "aws:ec2/eip:Eip":
            state.update(allocationId=f"eipalloc-{args.name}", publicIp="198.51.100.7")
        elif args.typ == "aws:ec2/natGateway:NatGateway":
            state["publicIp"] = "198.51.100.7"
        elif args.typ == "aws:ec2/vpcEndpoint:VpcEndpoint":
            state.setdefault("prefixListId", "pl-63a5400a")
        elif args.typ == "aws:ec2/placementGroup:PlacementGroup":
            state.setdefault("name", f"{args.name}-5e6f7a8")
        elif args.typ in ("aws:iam/role:Role", "aws:iam/instanceProfile:InstanceProfile"):
            state.setdefault("name", f"{args.name}-9a8b7c6")
            state["arn"] = f"arn:aws:iam::{ACCOUNT}:{kind.lower()}/{state['name']}"
        else:
            state.setdefault("arn", f"arn:aws:mock:{self.region}:{ACCOUNT}:{kind}/{args.name}")
        if args.custom:
            self.declared.append(
                Declared(
                    args.typ,
                    args.name,
                    dict(args.inputs),
                    resource_id,
                    state,
                    getattr(self.registering, "options", Options()),
                )
            )
        return resource_id, state

    def call(
        self, args: pulumi.runtime.MockCallArgs
    ) -> tuple[dict[str, Any], list[tuple[str, str]]]:
        self.calls.append((args.token, dict(args.args)))
        if args.token == "aws:index/getAvailabilityZones:getAvailabilityZones":
            zone_ids = [f"euw1-az{i}" for i in range(1, 4)]
            return {"names": ZONES, "zoneIds": zone_ids, "id": "zones"}, []
        if args.token == "aws:ec2/getInstanceTypeOfferings:getInstanceTypeOfferings":
            return self._offered(args.args), []
        if args.token == "aws:s3/getObjects:getObjects":
            prefix = str(args.args.get("prefix") or "")
            keys = sorted(k for k in self.objects if k.startswith(prefix))
            return {"keys": keys[: int(args.args.get("maxKeys") or 1000)], "id": "o"}, []
        if args.token == "aws:s3/getObject:getObject":
            key = str(args.args["key"])
            return {"body": self.objects[key], "key": key, "id": key}, []
        raise NotImplementedError(f"no mock for {args.token}")

    def _offered(self, args: dict[str, Any]) -> dict[str, Any]:
        wanted = [v for f in args.get("filters") or [] for v in f["values"]]
        types, zones = [], []
        for zone in ZONES:
            for kind in wanted:
                if self.offerings is None or kind in self.offerings.get(zone, set()):
                    types.append(kind)
                    zones.append(zone)
        locations = ["availability-zone"] * len(zones)
        return {"instanceTypes": types, "locations": zones, "locationTypes": locations, "id": "x"}


class OptionsMonitor(MockMonitor):
    """Pulumi's mock monitor, handing each resource's options (which the mocks' own
    arguments leave out) to the :class:`RecordingMocks` while it registers."""

    mocks: RecordingMocks

    def RegisterResource(self, request: Any) -> Any:  # the gRPC method, by its name
        self.mocks.registering.options = Options(
            delete_before_replace=bool(request.deleteBeforeReplace),
            retain_on_delete=bool(request.retainOnDelete),
        )
        try:
            return super().RegisterResource(request)
        finally:
            self.mocks.registering.options = Options()


def deploy(
    program: Callable[[], Any],
    stack: str = "test",
    config: dict[str, str] | None = None,
    region: str = "eu-west-1",
    objects: dict[str, str] | None = None,
    offerings: dict[str, set[str]] | None = None,
) -> tuple[Any, list[Declared]]:
    """Run ``program`` under mocks; its return value and every declared custom resource.

    ``program`` may return Outputs (or a structure of them): they are awaited, so an
    exception raised inside an ``apply`` fails the deployment. ``objects``: what the results
    bucket holds; ``offerings``: the instance types each zone offers (default: all).
    """
    _ensure_event_loop()
    mocks = RecordingMocks(region, objects, offerings)
    pulumi.runtime.set_mocks(
        mocks, project="brokerbench", stack=stack, preview=False, monitor=OptionsMonitor(mocks)
    )
    pulumi.runtime.set_all_config(dict(config or {}))
    result: dict[str, Any] = {}

    @pulumi.runtime.test
    def run() -> Any:
        value = program()
        result["value"] = value
        exports = value.exports() if hasattr(value, "exports") else {}
        return pulumi.Output.all(*exports.values()) if exports else None

    run()
    return result.get("value"), mocks.declared


def _ensure_event_loop() -> None:
    """Pulumi's mocks run on the thread's event loop: one that ``asyncio.run`` (e.g. an
    asyncio client earlier in the same process) closed and unset is replaced."""
    policy = asyncio.get_event_loop_policy()
    try:
        if not policy.get_event_loop().is_closed():
            return
    except RuntimeError:
        pass
    policy.set_event_loop(policy.new_event_loop())
