"""Every name of one run, relative to the run's root: the files of a local
``RESULTS_DIR/<run-id>/`` and the keys under ``s3://<bucket>/runs/<run-id>/``, which mirror
them, plus the control markers through which the machines of an AWS run coordinate.

``context.json``                          the run context (:mod:`workload.model.record`)
``raw/<table>/p<K>-<role>-<node>.<part>.parquet``
                                          a node part's records of one raw table
                                          (:mod:`workload.model.results`), written when
                                          the part ends
``raw/<table>/p<K>-<role>-<node>.<part>.c<S>.parquet``
                                          a chunk the part flushed while it ran: its
                                          records up to wall-clock second ``S``
                                          (exclusive) not in an earlier chunk
``raw/telemetry/p<K>-<node>[.c<S>].parquet``
                                          a node's resource telemetry at point K (a
                                          chunk flushed while the point ran: ``.c<S>``)
                                          (:mod:`workload.engine.telemetry`; ``<node>`` a
                                          broker node's name, ``sender-<n>``,
                                          ``receiver-<n>`` or ``host``)
``raw/telemetry-stream/<node>/<second>.jsonl``
                                          a broker machine's telemetry on AWS, uploaded
                                          in batches through the run (JSON lines of the
                                          same columns; no point: rows belong to a point
                                          by their second)
``nodes/p<K>-<role>-<node>.<part>.json``  how that node part ended
``faults/p<K>.json``                      a point's fault timeline (:mod:`workload.engine.faults`)
``backlog/p<K>.json``                     a point's backlog phases (:mod:`workload.engine.backlog`)
``analysis/``                             what the analysis job writes: ``summary.csv``,
                                          ``repeats.csv``, ``windows/``, ``histograms/``,
                                          ``backlog/``,
                                          ``resources/``,
                                          ``hdr/``, ``report.html``; on EMR its ``logs/``
``logs/<role>-<node>.log``                a client machine's agent log (AWS)
``logs/boot/<machine>.<log>.log``         a machine's boot (cloud-init) and node logs,
                                          uploaded when it stops or its set-up fails;
                                          ``<machine>.failed.log``: the failure's last lines
``control/``                              AWS markers: ``p<K>.ready``,
                                          ``p<K>-<role>-<node>.done``,
                                          ``<role>-<node>.started``, ``end`` (the run is
                                          over: every machine stops), and the fault markers
                                          ``faults/<node>/p<K>-f<I>.<begin|end>[.ack]``,
                                          ``faults/<node>/finished``

Names are POSIX paths: a local path is ``run_dir / name``, an S3 key ``prefix(run_id) + name``.
Every run has the same layout, :data:`LAYOUT`. Standard library only: the fault agent of a
broker machine imports it from the uploaded wheel.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: Kinds of fault marker: a fault begins, a fault ends.
BEGIN, END = "begin", "end"

_NODE_FILE = re.compile(r"p(\d+)-(sender|receiver)-(\d+)\.(\d+)(?:\.c(\d+))?\.(?:parquet|json)")
_FAULT_MARKER = re.compile(r"p(\d+)-f(\d+)\.(begin|end)$")


@dataclass(frozen=True)
class RunLayout:
    """The names of a run's files and keys (see the module)."""

    runs: str = "runs"
    context: str = "context.json"
    raw: str = "raw"
    nodes: str = "nodes"
    faults: str = "faults"
    backlog: str = "backlog"
    #: The glob of the point timelines in :attr:`faults`.
    timelines: str = "p*.json"
    analysis: str = "analysis"
    logs: str = "logs"
    control: str = "control"
    #: What a fault agent appends to a fault marker it answers.
    ack_suffix: str = ".ack"

    # -- the run's root in S3 ------------------------------------------------------------

    def prefix(self, run_id: str) -> str:
        """The run's root in its results bucket: ``runs/<run-id>/``."""
        return f"{self.runs}/{run_id}/"

    # -- records ---------------------------------------------------------------------------

    @staticmethod
    def part_name(point: int, role: str, node: int, part: int = 0) -> str:
        """The base name of a node part's files: ``p<K>-<role>-<node>.<part>``."""
        return f"p{point}-{role}-{node}.{part}"

    @staticmethod
    def part_of(path: str) -> tuple[int, str, int, int] | None:
        """(point, role, node, part) of a record or status file named by
        :meth:`part_name` (any directory before it); None for any other file."""
        match = _NODE_FILE.fullmatch(path.rsplit("/", 1)[-1])
        if match is None:
            return None
        point, role, node, part, _ = match.groups()
        return int(point), role, int(node), int(part)

    @staticmethod
    def chunk_of(path: str) -> int | None:
        """The cut of a chunk file (:meth:`raw_file` with ``cut``): the wall-clock second
        before which it and the part's earlier chunks hold every record; None for a part's
        final file or any other file."""
        match = _NODE_FILE.fullmatch(path.rsplit("/", 1)[-1])
        if match is None or match.group(5) is None:
            return None
        return int(match.group(5))

    def raw_table(self, table: str) -> str:
        """The folder of one raw table (``raw/seconds``)."""
        return f"{self.raw}/{table}"

    def raw_file(
        self, table: str, point: int, role: str, node: int, part: int = 0, cut: int | None = None
    ) -> str:
        """A node part's file of one raw table: the final one, or (``cut``) a chunk flushed
        while the part ran, holding its records before wall-clock second ``cut``."""
        chunk = "" if cut is None else f".c{cut}"
        return f"{self.raw_table(table)}/{self.part_name(point, role, node, part)}{chunk}.parquet"

    #: The raw table of the resource telemetry (not a node part's: one file per node).
    telemetry: str = "telemetry"

    def telemetry_file(self, point: int, node: str, cut: int | None = None) -> str:
        """A node's telemetry at ``point``; ``node`` as the sampler names it; ``cut``: a
        chunk flushed while the point ran (its rows before that wall-clock second)."""
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", node)
        chunk = "" if cut is None else f".c{cut}"
        return f"{self.raw_table(self.telemetry)}/p{point}-{safe}{chunk}.parquet"

    #: Where broker machines on AWS stream their telemetry.
    telemetry_stream: str = "raw/telemetry-stream"

    def telemetry_batch(self, node: str, second: int, part: int = 0) -> str:
        """A batch of a broker machine's telemetry rows, from ``second`` on; ``part``
        numbers the further batches that begin in the same second (none overwrites one
        before it)."""
        name = f"{second}.{part}" if part else str(second)
        return f"{self.telemetry_stream}/{node}/{name}.jsonl"

    @staticmethod
    def point_files(point: int) -> str:
        """The glob of one point's files in a raw table's folder."""
        return f"p{point}-*.parquet"

    def status(self, point: int, role: str, node: int, part: int = 0) -> str:
        return f"{self.nodes}/{self.part_name(point, role, node, part)}.json"

    def timeline(self, point: int) -> str:
        return f"{self.faults}/p{point}.json"

    def backlog_phases(self, point: int) -> str:
        return f"{self.backlog}/p{point}.json"

    # -- analysis --------------------------------------------------------------------------

    @property
    def summary(self) -> str:
        return f"{self.analysis}/summary.csv"

    @property
    def repeats(self) -> str:
        return f"{self.analysis}/repeats.csv"

    @property
    def windows(self) -> str:
        return f"{self.analysis}/windows"

    @property
    def histograms(self) -> str:
        return f"{self.analysis}/histograms"

    @property
    def backlog_series(self) -> str:
        """Per point with ``[backlog]`` and second: confirmed, received and queued messages."""
        return f"{self.analysis}/backlog"

    @property
    def resources(self) -> str:
        """Per point and node: the telemetry's means and busiest seconds over the period."""
        return f"{self.analysis}/resources"

    @property
    def report(self) -> str:
        return f"{self.analysis}/report.html"

    @property
    def analysis_logs(self) -> str:
        """Where EMR Serverless writes the analysis job's logs (a folder)."""
        return f"{self.analysis}/logs/"

    def hdr(self, point: int, metric: str) -> str:
        """A point's whole-run histogram of ``metric`` as an HdrHistogram distribution."""
        return f"{self.analysis}/hdr/point-{point}-{metric}.hgrm"

    def agent_log(self, role: str, node: int) -> str:
        return f"{self.logs}/{role}-{node}.log"

    @property
    def boot_logs(self) -> str:
        """Where each machine uploads its boot and node logs (a folder)."""
        return f"{self.logs}/boot/"

    def boot_failure(self, machine: str) -> str:
        """The last lines of a machine's node log, uploaded when its set-up failed."""
        return f"{self.boot_logs}{machine}.failed.log"

    # -- AWS control markers ---------------------------------------------------------------

    @property
    def markers(self) -> str:
        """The folder of every control marker (a listing prefix)."""
        return f"{self.control}/"

    @property
    def point_markers(self) -> str:
        """The listing prefix of the sweep points' markers (ready and done)."""
        return f"{self.control}/p"

    def ready(self, point: int) -> str:
        """Posted by the coordinator once ``point`` is prepared: nodes may run it."""
        return f"{self.control}/p{point}.ready"

    def done(self, point: int, role: str, node: int) -> str:
        """Posted by a node (or for it, by the coordinator) when its part of ``point`` ended."""
        return f"{self.control}/p{point}-{role}-{node}.done"

    def started(self, role: str, node: int) -> str:
        """Posted by a client node's agent when it starts."""
        return f"{self.control}/{role}-{node}.started"

    @property
    def ended(self) -> str:
        """Posted by the coordinating agent when the run is over, however it ended: every
        machine of the run then stops itself."""
        return f"{self.control}/end"

    @property
    def fault_markers(self) -> str:
        """The folder of every fault marker and acknowledgement."""
        return f"{self.control}/{self.faults}/"

    def fault_node(self, node: str) -> str:
        """The folder of one broker node's fault markers (``broker-1``)."""
        return f"{self.fault_markers}{node}/"

    def fault_marker(self, node: str, point: int, fault: int, kind: str) -> str:
        """The marker of fault ``fault`` of ``point`` beginning or ending (``kind``)."""
        return f"{self.fault_node(node)}p{point}-f{fault}.{kind}"

    @staticmethod
    def fault_marker_of(key: str) -> tuple[int, int, str] | None:
        """(point, fault, kind) of a fault marker's key; None for any other key."""
        found = _FAULT_MARKER.search(key)
        if found is None:
            return None
        return int(found.group(1)), int(found.group(2)), found.group(3)

    def fault_ack(self, marker: str) -> str:
        return f"{marker}{self.ack_suffix}"

    def fault_finished(self, node: str) -> str:
        """Posted when the run has no more points: the node's fault agent exits."""
        return f"{self.fault_node(node)}finished"


#: The layout of every run.
LAYOUT = RunLayout()
