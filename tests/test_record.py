"""The typed run record (``workload.model.record``): a context written today reads back and writes
again unchanged; one an older version wrote still loads, with the keys it lacks defaulted."""

from __future__ import annotations

import json
from pathlib import Path

from analysis.records import expected_parts
from brokers import registry
from infra.plan import plan_fleet
from workload.engine.context import build_context, point_entry, recorded_scenario
from workload.engine.node import processes_for
from workload.engine.search import CapacitySearch, probe_point
from workload.model.manifest import RunManifest
from workload.model.record import CostRecord, RunContext, load_context, write_context
from workload.model.results import PartKey
from workload.model.scenario import expand
from workload.model.scenario_file import load_scenario

SCENARIOS = Path(__file__).resolve().parent.parent / "workload" / "scenarios"

#: What the runner adds to the broker's entry (``described``: what a server says of itself).
BROKER = {
    "deployment": "local",
    "topology": "single",
    "endpoints": ["127.0.0.1:6379"],
    "version": "7.2.4",
    "settings": {"appendfsync": "everysec"},
}


def test_a_context_of_today_round_trips_unchanged(tmp_path: Path) -> None:
    scenario = load_scenario(SCENARIOS / "redis-repeat.toml")
    system = registry.get("redis")
    context = build_context("run-1", scenario, "r.toml", system, expand(scenario), BROKER)
    context.cost = CostRecord(region="us-east-1", instances={"m5.large": 3})
    context.status, context.errors = "failed", ["broker node redis-0 died during the run"]
    write_context(tmp_path, context)
    written = json.loads((tmp_path / "context.json").read_text())
    assert written["points"][2]["base"] == 0 and written["points"][2]["repeat"] == 1
    # The keys and values of today's context.json, and no more.
    assert set(written) == {
        *("run_id", "scenario_file", "scenario", "points", "broker", "clients", "host"),
        *("clock", "started", "finished", "status", "errors", "cost"),
    }
    assert written["scenario"] == recorded_scenario(scenario)
    assert written["broker"] == {
        "system": "redis",
        "title": system.title,
        "reference_topology": system.reference_topology.roles,
        "caveats": list(system.caveats),
        "stand_in": system.local.stand_in if system.local else "",
        "keys": {"sent_as": "stream by key", "ordered": True},
        **BROKER,
    }
    assert written["cost"] == {"region": "us-east-1", "instances": {"m5.large": 3}}
    for entry, point in zip(written["points"], expand(scenario), strict=True):
        assert entry == {
            "point": point.index,
            "label": point.label,
            "varied": point.varied,
            "repeat": point.repeat,
            "base": point.base,
            "load": point.load.model_dump(mode="json"),
            "params": point.params,
            "client": "redis",
            "processes_per_node": processes_for(point.load, "sender"),
            "receiver_processes_per_node": processes_for(point.load, "receiver"),
        }

    loaded = load_context(tmp_path)
    assert loaded.points[2].base == 0 and loaded.points[3].load.receivers == 2
    assert loaded.broker.version == "7.2.4" and loaded.broker.endpoints == ["127.0.0.1:6379"]
    assert loaded.cost is not None and loaded.cost.instances == {"m5.large": 3}
    assert loaded.dump() == written
    write_context(tmp_path, loaded)
    assert json.loads((tmp_path / "context.json").read_text()) == written


def test_a_search_context_round_trips_unchanged(tmp_path: Path) -> None:
    scenario = load_scenario(SCENARIOS / "redis-capacity.toml")
    assert scenario.search is not None
    system = registry.get("redis")
    search = CapacitySearch(scenario.search, scenario.load.sender_workers)
    context = build_context("run-1", scenario, "c.toml", system, [], BROKER)
    context.search = search.record
    write_context(tmp_path, context)
    before = json.loads((tmp_path / "context.json").read_text())
    assert before["search"]["probes"] == [] and before["points"] == []

    rate = search.next_rate()
    assert rate is not None
    context.points.append(point_entry(system, probe_point(scenario, 0, rate)))
    write_context(tmp_path, context)  # the record as it stands now: one probe's point
    written = json.loads((tmp_path / "context.json").read_text())
    assert written["points"][0]["load"]["rate"] == context.points[0].load.rate
    assert RunContext.of(written).dump() == written


def test_an_older_context_still_loads(tmp_path: Path) -> None:
    """A context of the first versions: no client, processes, repeat or base in its points,
    the clock in its old shape, no cost or search; and a key of no version known here."""
    older = {
        "run_id": "redis-smoke-20250101-000000-abcd",
        "scenario_file": "redis-smoke.toml",
        "scenario": {
            "name": "redis-smoke",
            "measurement": {"warmup": None, "window": 60.0, "step": 10.0},
        },
        "points": [
            {
                "point": p,
                "label": f"threads={p + 1}",
                "varied": {"threads": p + 1},
                "load": {"threads": p + 1, "sender_nodes": 1, "message_size": 100},
                "params": {"streams": 1},
                "from_a_newer_version": [1, 2],
            }
            for p in range(2)
        ],
        "broker": {"system": "redis", "title": "Redis", "caveats": [], "stand_in": ""},
        "clients": {"brokerbench": "0.1.0", "redis": "5.0.1"},
        "host": {"hostname": "h", "cpus": 2},
        "clock": {"sync": "single host: one clock", "offset_ms": 0.0},
        "started": "2025-01-01T00:00:00+00:00",
        "finished": "2025-01-01T00:02:00+00:00",
        "status": "complete",
        "errors": [],
    }
    (tmp_path / "context.json").write_text(json.dumps(older))
    context = load_context(tmp_path)
    second = context.points[1]
    assert (second.repeat, second.base, second.client, second.processes) == (0, 1, None, 1)
    assert second.load.receivers == 2 and second.load.rate is None
    assert context.cost is None and context.search is None and context.broker.version is None
    assert context.clock == {"sync": "single host: one clock", "offset_ms": 0.0}
    assert context.scenario.measurement.window == 60.0
    assert expected_parts(second) == {
        PartKey(1, "sender", 0, 0),
        PartKey(1, "receiver", 0, 0),
        PartKey(1, "receiver", 1, 0),
    }
    # What it names is kept as written (and the keys it lacked take their defaults).
    dumped = context.dump()
    assert dumped["points"][1]["from_a_newer_version"] == [1, 2]
    assert dumped["clock"] == older["clock"] and dumped["host"] == older["host"]
    assert dumped["points"][1]["base"] == 1 and "cost" not in dumped


def test_the_manifest_names_each_point_s_client_machines() -> None:
    """The stack writes each point of the manifest from its sweep point: the client
    machines of each role it takes part with."""
    points = expand(load_scenario(SCENARIOS / "redis-repeat.toml"))
    fleet = plan_fleet({"master": 1}, points, "10.0.0.0/24")
    assert [(p.index, p.senders, p.receivers) for p in fleet.points][:2] == [(0, 1, 2), (1, 1, 2)]
    manifest = RunManifest(run_id="r", points=list(fleet.points))
    assert RunManifest.model_validate_json(manifest.to_json()) == manifest
