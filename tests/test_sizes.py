"""Message sizes: the distributions of ``load.message_size`` (strict, one line per problem),
what they draw with a fixed seed, the senders' payload pools, the bytes the workers record
and write, and the summary's byte columns."""

from __future__ import annotations

import json
import math
import statistics
import string
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from analysis import summary_table
from analysis.columns import COLUMNS, SUMMARY_COLUMNS
from analysis.context_tables import _from_load
from brokers.base import Adapter, Received, ReceivedBatch
from tests.conftest import SCENARIOS
from tests.support import small_scenario
from workload.engine import message
from workload.engine.client_loops import run_sender
from workload.engine.node_records import write_node
from workload.engine.recording import WorkerRecorder
from workload.engine.worker import ReceiverLoop, SenderLoop, WorkerSettings
from workload.model.bounds import HEADER_MAX
from workload.model.errors import ScenarioError
from workload.model.layout import LAYOUT
from workload.model.scenario import Scenario, expand
from workload.model.scenario_file import load_scenario
from workload.model.sections import LoadSection
from workload.model.sizes import MAX_P99_RATIO, Z99, SizeDistribution


def scenario(tmp_path: Path, load: str) -> Scenario:
    return small_scenario(tmp_path, "postgresql", load)


def problems(tmp_path: Path, load: str) -> list[str]:
    with pytest.raises(ScenarioError) as info:
        scenario(tmp_path, load)
    return info.value.lines


def sizes(**table: object) -> SizeDistribution:
    return SizeDistribution.model_validate(table)


def test_a_number_and_a_fixed_table_are_the_same_and_written_back_as_the_number(
    tmp_path: Path,
) -> None:
    number = scenario(tmp_path, "message_size = 300\n").load
    table = scenario(tmp_path, '[load.message_size]\nkind = "fixed"\nsize = 300\n').load
    assert number.message_size == table.message_size
    assert number.message_size.fixed == 300 and number.message_size.label == "300"
    assert number.model_dump()["message_size"] == table.model_dump()["message_size"] == 300
    assert scenario(tmp_path, "").load.message_size.fixed == 100  # the default


def test_a_distribution_round_trips_through_the_record(tmp_path: Path) -> None:
    text = '[load.message_size]\nkind = "weighted"\nsizes = [100, 5000]\nweights = [3, 1]\n'
    (point,) = expand(scenario(tmp_path, text))
    written = point.load.model_dump(mode="json")["message_size"]
    assert written == {"kind": "weighted", "sizes": [100, 5000], "weights": [3.0, 1.0]}
    assert LoadSection.model_validate(point.load.model_dump()) == point.load
    assert point.load.message_size.label == "weighted 100:3 5000:1"
    # The report's table of points reads a recorded distribution in the same words.
    assert _from_load("message_size")({"load": {"message_size": written}}) == (
        "weighted 100:3 5000:1"
    )


@pytest.mark.parametrize(
    ("load", "where", "says"),
    [
        ("message_size = 50\n", "load.message_size (line 7)", "72 bytes (its identity header)"),
        ('message_size = "100"\n', "load.message_size (line 7)", "(got a string)"),
        ("message_size = 100.0\n", "load.message_size (line 7)", "(got a float)"),
        (
            "[load.message_size]\nkind = 'uniform'\nmin = 100\n",
            "load.message_size.kind (line 8)",
            'kind = "uniform" needs max',
        ),
        (
            "[load.message_size]\nkind = 'uniform'\nmin = 500\nmax = 100\n",
            "load.message_size.min (line 9)",
            "min (500) is above max (100)",
        ),
        (
            "[load.message_size]\nkind = 'uniform'\nmin = 10\nmax = 100\n",
            "load.message_size.min (line 9)",
            "greater than or equal to 72",
        ),
        (
            "[load.message_size]\nkind = 'uniform'\nsize = 100\nmin = 100\nmax = 200\n",
            "load.message_size.size (line 9)",
            'kind = "uniform" takes min and max, not size',
        ),
        (
            "[load.message_size]\nkind = 'normal'\n",
            "load.message_size.kind (line 8)",
            "'fixed', 'uniform', 'weighted' or 'lognormal'",
        ),
        (
            "[load.message_size]\nkind = 'fixed'\nsize = 100\nsise = 100\n",
            "load.message_size.sise (line 10)",
            "unknown key (did you mean size?)",
        ),
        (
            "[load.message_size]\nkind = 'weighted'\nsizes = [100, 200]\nweights = [1]\n",
            "load.message_size.weights (line 10)",
            "1 weight(s) for 2 size(s)",
        ),
        (
            "[load.message_size]\nkind = 'weighted'\nsizes = [100, 100]\nweights = [1, 1]\n",
            "load.message_size.sizes (line 9)",
            "100 is given twice",
        ),
        (
            "[load.message_size]\nkind = 'weighted'\nsizes = [100, 200]\nweights = [1, -1]\n",
            "load.message_size.weights[1] (line 10)",
            "greater than 0",
        ),
        (
            "[load.message_size]\nkind = 'weighted'\nsizes = [100]\nweights = [inf]\n",
            "load.message_size.weights[0] (line 10)",
            "finite",
        ),
        (
            "[load.message_size]\nkind = 'lognormal'\nmean = 1000\np99 = 900\n",
            "load.message_size.p99 (line 10)",
            "must be above the mean (1000)",
        ),
        (
            "[load.message_size]\nkind = 'lognormal'\nmean = 1000\np99 = 20000\n",
            "load.message_size.p99 (line 10)",
            "at most 14.97 × it",
        ),
        (
            "[load.message_size]\nkind = 'lognormal'\nmean = 1000\np99 = 8000\nmax = 5000\n",
            "load.message_size.max (line 11)",
            "max (5000) is below p99 (8000)",
        ),
        (
            "[load.message_size]\nkind = 'lognormal'\nmean = 1000\np99 = 8000\nmin = 2000\n",
            "load.message_size.mean (line 9)",
            "outside min..max (2000..80000)",
        ),
        (
            "pool_size = 100000\n[load.message_size]\nkind = 'uniform'\nmin = 100\nmax = 20000\n",
            "load.pool_size (line 7)",
            "pool_size × the largest message size = 100000 × 20000 bytes",
        ),
    ],
)
def test_a_bad_distribution_is_one_line_naming_its_key(
    tmp_path: Path, load: str, where: str, says: str
) -> None:
    (line,) = problems(tmp_path, load)
    key, at = where.split(" ", 1)
    assert line.startswith(f"{tmp_path / 's.toml'}: {key}: ") and line.endswith(at), line
    assert says in line, line


def test_a_misspelt_key_is_named_and_so_is_the_key_it_leaves_missing(tmp_path: Path) -> None:
    unknown, missing = problems(tmp_path, "[load.message_size]\nkind = 'fixed'\nsise = 100\n")
    assert "load.message_size.sise: unknown key (did you mean size?) (line 9)" in unknown
    assert 'load.message_size.kind: kind = "fixed" needs size (line 8)' in missing


def test_the_json_schema_takes_a_number_or_a_distribution() -> None:
    schema = Scenario.model_json_schema()
    field = schema["$defs"]["LoadSection"]["properties"]["message_size"]
    number, table = field["anyOf"]
    assert number == {"type": "integer", "minimum": HEADER_MAX, "maximum": 16 * 1024 * 1024}
    assert table == {"$ref": "#/$defs/SizeDistribution"}
    kinds = schema["$defs"]["SizeDistribution"]["properties"]["kind"]["enum"]
    assert kinds == ["fixed", "uniform", "weighted", "lognormal"]
    assert field["default"] == 100 and "distributed" in field["description"]


def test_fixed_and_uniform_draws() -> None:
    assert sizes(kind="fixed", size=300).draw(5, seed=1) == [300] * 5
    uniform = sizes(kind="uniform", min=100, max=199)
    drawn = uniform.draw(20_000, seed=7)
    assert drawn == uniform.draw(20_000, seed=7) != uniform.draw(20_000, seed=8)
    assert min(drawn) == 100 and max(drawn) == 199  # both ends are reached
    assert len(set(drawn)) == 100
    assert abs(statistics.fmean(drawn) - 149.5) < 1.0 and uniform.average == 149.5
    assert (uniform.upper, uniform.label) == (199, "uniform 100–199")


def test_weighted_draws_take_each_size_its_share() -> None:
    weighted = sizes(kind="weighted", sizes=[100, 1_000, 10_000], weights=[7, 2, 1])
    counts = Counter(weighted.draw(50_000, seed=3))
    assert set(counts) == {100, 1_000, 10_000}
    for size, share in ((100, 0.7), (1_000, 0.2), (10_000, 0.1)):
        assert abs(counts[size] / 50_000 - share) < 0.01, (size, counts)
    assert weighted.upper == 10_000 and weighted.average == 100 * 0.7 + 1_000 * 0.2 + 1_000


def test_lognormal_parameters_give_the_mean_and_p99_asked_for() -> None:
    lognormal = sizes(kind="lognormal", mean=1_000, p99=8_000)
    mu, sigma = lognormal.lognormal_params()
    assert math.isclose(math.exp(mu + sigma**2 / 2), 1_000)
    assert math.isclose(math.exp(mu + Z99 * sigma), 8_000)
    assert 0 < sigma < Z99  # the smaller of the two spreads
    drawn = lognormal.draw(200_000, seed=11)
    assert abs(statistics.fmean(drawn) / 1_000 - 1) < 0.03
    p99 = sorted(drawn)[int(0.99 * len(drawn))]
    assert abs(p99 / 8_000 - 1) < 0.05
    # Drawn below the header's 72 bytes or above 10 × p99: sent at those.
    assert min(drawn) == HEADER_MAX and max(drawn) <= 80_000 == lognormal.upper
    assert lognormal.label == "lognormal mean 1000 p99 8000"


def test_lognormal_at_the_largest_ratio_and_within_given_bounds() -> None:
    widest = sizes(kind="lognormal", mean=1_000, p99=1_000 * MAX_P99_RATIO)
    assert math.isclose(widest.lognormal_params()[1], Z99)
    bounded = sizes(kind="lognormal", mean=1_000, p99=3_000, min=500, max=4_000)
    drawn = bounded.draw(10_000, seed=2)
    assert min(drawn) == 500 and max(drawn) == 4_000
    assert bounded.label == "lognormal mean 1000 p99 3000 in 500–4000"


def test_a_senders_pool_takes_the_drawn_sizes() -> None:
    load = LoadSection.model_validate(
        {"pool_size": 500, "message_size": {"kind": "uniform", "min": 80, "max": 3_000}}
    )
    pool = message.payload_pool(load, seed=4)
    assert [len(p) for p in pool] == load.message_size.draw(500, seed=4)
    assert pool == message.payload_pool(load, seed=4)
    alphabet = set((string.ascii_letters + string.digits).encode())
    assert all(set(p) <= alphabet for p in pool)
    # A fixed size: the pool as before.
    fixed = LoadSection.model_validate({"pool_size": 20, "message_size": 150})
    assert message.payload_pool(fixed, seed=4) == message.message_pool(20, 150, seed=4)


class Store(Adapter[int]):
    """Keeps what it is sent."""

    def __init__(self) -> None:
        self.stored: list[bytes] = []
        self.batches: list[int] = []

    def send(self, batch: Sequence[bytes]) -> None:
        self.stored.extend(batch)
        self.batches.append(len(batch))

    def receive(self, max_n: int) -> list[Received[int]]:
        return []

    def ack(self, receipts: Sequence[int]) -> None:
        pass


def test_every_byte_sent_is_recorded_received_and_written(tmp_path: Path) -> None:
    """Sizes drawn from a distribution: the bytes a sender confirms, the bytes and sizes a
    receiver records (this run's messages only; acknowledged bytes count every body), and
    the raw tables they are written to, all equal the bodies' lengths."""
    load = LoadSection.model_validate(
        {
            "pool_size": 300,
            "messages": 400,
            "duration": 60,
            "message_size": {"kind": "weighted", "sizes": [90, 700, 4_000], "weights": [5, 3, 1]},
        }
    )
    pool = message.payload_pool(load, seed=0)
    settings = WorkerSettings("sz000000.0", 0, 0, load, pool, lambda: False)
    sender = SenderLoop(settings, WorkerRecorder("sender", 0, 0))
    store = Store()
    run_sender(store, sender)
    bodies = store.stored
    assert len(bodies) == 400 and {len(b) for b in bodies} == {90, 700, 4_000}
    sent = sum(s.sent_bytes for s in sender.recorder.seconds.values())
    assert sent == sum(map(len, bodies))
    receiver = ReceiverLoop(settings, WorkerRecorder("receiver", 0, 0))
    foreign = b"not a brokerbench message" * 4
    # A batch read with numpy (≥ 32 bodies) and one read per message, each with a foreign body.
    for batch in ([*bodies[:300], foreign], [foreign, *bodies[300:]]):
        receiver.acked(receiver.handle(ReceivedBatch(batch, list(range(len(batch))))))
    assert list(receiver.recorder.rx_size) == [len(b) for b in bodies]
    stats = receiver.recorder.seconds.values()
    assert sum(s.received_bytes for s in stats) == sent
    assert sum(s.acked_bytes for s in stats) == sent + 2 * len(foreign)
    write_node(tmp_path, "r", 0, "sender", 0, [sender.recorder])
    write_node(tmp_path, "r", 0, "receiver", 0, [receiver.recorder])
    seconds = pq.read_table(tmp_path / LAYOUT.raw_table("seconds")).to_pylist()
    assert sum(r["sent_bytes"] for r in seconds) == sent
    assert sum(r["received_bytes"] for r in seconds) == sent
    received = pq.read_table(tmp_path / LAYOUT.raw_table("received")).to_pydict()
    assert received["size"] == [len(b) for b in bodies]


@pytest.mark.parametrize(("smallest", "largest"), [(1, 10), (40, 60), (800, 800)])
def test_send_batches_are_uniform_between_the_smallest_and_the_largest(
    smallest: int, largest: int
) -> None:
    """Batch sizes are drawn uniformly in [min_send_batch, max_send_batch] (one size when
    they are equal); the last batch is cut to the messages left."""
    load = LoadSection.model_validate(
        {"min_send_batch": smallest, "max_send_batch": largest, "messages": 100_000}
    )
    settings = WorkerSettings(
        "bt000000.0", 0, 0, load, message.payload_pool(load, 0), lambda: False
    )
    store = Store()
    run_sender(store, SenderLoop(settings, WorkerRecorder("sender", 0, 0)))
    *sizes, last = store.batches
    assert sum(store.batches) == 100_000 and 1 <= last <= largest
    assert min(sizes) == smallest and max(sizes) == largest
    mean = (smallest + largest) / 2
    assert abs(statistics.fmean(sizes) - mean) <= 0.1 * mean


def test_stamping_keeps_every_size() -> None:
    pool = message.sized_pool([72, 73, 500, 10_000], seed=1)
    stamped = message.Stamper("ab12cd34.999", 999, 9_999).stamp_batch(
        pool, 10**11, time.time_ns(), time.time_ns(), 1e6
    )
    assert [len(m) for m in stamped] == [72, 73, 500, 10_000]
    assert message.parse(stamped[0]) is not None


def test_the_summary_declares_bytes_beside_msgs() -> None:
    for name in ("sent_bytes", "received_bytes"):
        assert COLUMNS[name].unit == "bytes"
    for name in ("send_mb_per_s", "receive_mb_per_s"):
        assert COLUMNS[name].unit == "MB/s" and COLUMNS[name].better.value == "higher"
    order = SUMMARY_COLUMNS
    assert order.index("received") < order.index("sent_bytes") < order.index("send_msgs_per_s")
    titles = [title for _, title, _ in summary_table.TABLE]
    assert titles.index("receive msgs/s") + 1 == titles.index("send MB/s")
    assert titles.index("send MB/s") + 1 == titles.index("receive MB/s")


def test_the_shipped_size_scenario_is_a_lognormal_on_redis() -> None:
    shipped = load_scenario(SCENARIOS / "redis-sizes.toml")
    assert shipped.broker.system == "redis"
    assert shipped.load.message_size.kind == "lognormal"
    assert json.loads(json.dumps(shipped.load.model_dump()))["message_size"]["p99"] == 8000


class SizedRun:
    """What a run against a real broker recorded of its bytes: the analysed summary row,
    and the raw tables' figures the row must equal."""

    def __init__(self, run_dir: Path, row: Any) -> None:
        self.row = row
        self.seconds = pq.read_table(run_dir / LAYOUT.raw_table("seconds")).to_pylist()
        self.received_sizes = (
            pq.read_table(run_dir / LAYOUT.raw_table("received"), columns=["size"])
            .column("size")
            .to_pylist()
        )
        self.context = json.loads((run_dir / LAYOUT.context).read_text())

    def check_exact(self) -> None:
        """The summary's byte totals are the raw records' to the byte; with every confirmed
        message received once and nothing else, sent and received bytes are equal."""
        row = self.row
        assert row["delivery"] == "drained" and row["lost"] == 0 and row["duplicated"] == 0
        assert row["unconfirmed_received"] == 0 and row["sent"] == row["received"] > 0
        assert row["sent_bytes"] == sum(r["sent_bytes"] for r in self.seconds)
        assert row["received_bytes"] == sum(self.received_sizes)
        assert row["received_bytes"] == sum(r["received_bytes"] for r in self.seconds)
        assert row["sent_bytes"] == row["received_bytes"]
        assert row["send_mb_per_s"] > 0 and row["receive_mb_per_s"] > 0


def sized_run(run_dir: Path, spark: Any) -> SizedRun:
    """Analyse a run (one sweep point) with the session's Spark."""
    from analysis.job import analyse

    (row,) = analyse(spark, run_dir)
    return SizedRun(run_dir, row)
