"""A JVM's garbage-collection pause time, read from its performance-data file.

Every HotSpot JVM (unless started with ``-XX:-UsePerfData``) keeps its counters in a
memory-mapped file ``<tmp>/hsperfdata_<user>/<pid>`` — what ``jstat`` reads. Reading that
file costs a few hundred microseconds and needs no agent, no JMX port and no change to how
a broker is started, so every JVM broker (Kafka, Artemis, Pulsar, RocketMQ, ActiveMQ, the
SQS stand-in) gets the same figure.

The figure is the stop-the-world time of every collector (``sun.gc.collector.<n>.time``:
young, full and the pauses of G1's concurrent cycle, as ``jstat``'s GCT adds them), in
seconds since the JVM started. Standard library only: it runs in the telemetry sampler of
every node, on AWS too.
"""

from __future__ import annotations

import os
import struct
import tempfile
from pathlib import Path

MAGIC = 0xCAFEC0C0
_PROLOGUE = struct.Struct(">IBBBBiiqii")
_ENTRY = "iiiBBBBi"
_TIME = b"sun.gc.collector."
_FREQUENCY = b"sun.os.hrt.frequency"


def perf_file(pid: int) -> Path | None:
    """The performance-data file of the JVM ``pid``, None when it has none (not a JVM, or
    one without performance data)."""
    try:
        user = _user_of(pid)
    except OSError:
        return None
    for base in {tempfile.gettempdir(), "/tmp"}:
        path = Path(base) / f"hsperfdata_{user}" / str(pid)
        if path.is_file():
            return path
    return None


def _user_of(pid: int) -> str:
    import pwd

    uid = os.stat(f"/proc/{pid}").st_uid
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def gc_pause_seconds(data: bytes) -> float | None:
    """The summed pause time of every collector in a performance-data file's ``data``, in
    seconds; None when the data is not such a file or has no collector counters."""
    if len(data) < _PROLOGUE.size:
        return None
    magic = struct.unpack_from(">I", data, 0)[0]
    if magic != MAGIC:
        return None
    order = "<" if data[4] == 1 else ">"
    prologue = struct.unpack_from(order + "IBBBBiiqii", data, 0)
    entry_offset, entries = prologue[8], prologue[9]
    entry = struct.Struct(order + _ENTRY)
    ticks = 0
    frequency = 0
    found = False
    offset = entry_offset
    for _ in range(entries):
        if offset + entry.size > len(data):
            break
        length, name_offset, vector, dtype, _flags, _units, _var, data_offset = entry.unpack_from(
            data, offset
        )
        if length <= 0:
            break
        name_start = offset + name_offset
        name_end = data.find(b"\0", name_start, offset + length)
        name = data[name_start:name_end]
        if vector == 0 and dtype == ord("J"):
            if name.startswith(_TIME) and name.endswith(b".time"):
                ticks += struct.unpack_from(order + "q", data, offset + data_offset)[0]
                found = True
            elif name == _FREQUENCY:
                frequency = struct.unpack_from(order + "q", data, offset + data_offset)[0]
        offset += length
    if not found or frequency <= 0:
        return None
    return ticks / frequency


def read_gc_pause_seconds(path: Path) -> float | None:
    """:func:`gc_pause_seconds` of a performance-data file (None when it cannot be read)."""
    try:
        return gc_pause_seconds(path.read_bytes())
    except OSError:
        return None
