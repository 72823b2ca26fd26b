"""The text table of one system: brokerbench and its peer tool, row by row, with the ratio of
brokerbench's send rate to the peer's at the same load, and the notes the tools' figures
need."""

from __future__ import annotations

from collections.abc import Sequence

from .base import ToolRow

BROKERBENCH = "brokerbench"
HEADER = (
    "tool",
    "threads",
    "send msgs/s",
    "receive msgs/s",
    "publish p50 ms",
    "publish p99 ms",
    "client CPU %",
    "broker CPU %",
    "other CPU %",
    "CPU s",
    "CPU over",
    "send µs/msg",
    "recv µs/msg",
    "client µs/msg",
    "send ÷ peer",
    "µs/msg ÷ peer",
)
#: A peer row below this fraction of the tool's standalone rate was disturbed.
UNDISTURBED = 0.8
DISTURBED = "peer disturbed"


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def _ms(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.3f}" if value < 10 else f"{value:,.1f}"


def _us(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _ratio(value: float) -> str:
    return f"{value:.3f}" if value < 10 else f"{value:,.1f}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def disturbed(row: ToolRow, rows: Sequence[ToolRow]) -> bool:
    """A peer row whose send rate is below :data:`UNDISTURBED` of the best the same tool
    did in the table (its standalone reference run included)."""
    if row.tool == BROKERBENCH or row.measurement is None or not row.measurement.send_per_s:
        return False
    best = max(
        (r.measurement.send_per_s or 0.0)
        for r in rows
        if r.tool == row.tool and r.measurement is not None
    )
    return row.measurement.send_per_s < UNDISTURBED * best


def peer_for(row: ToolRow, rows: Sequence[ToolRow]) -> ToolRow | None:
    """The peer row a brokerbench row is compared with: same threads, else the only one
    (never the standalone reference run)."""
    peers = [r for r in rows if r.tool != BROKERBENCH and not r.reference]
    same = [r for r in peers if r.threads == row.threads]
    if same:
        return same[0]
    unthreaded = [r for r in peers if r.threads is None]
    return unthreaded[0] if unthreaded else None


def compared_us(row: ToolRow, peer: ToolRow) -> tuple[float | None, float | None]:
    """The CPU µs per message compared: all client CPU where the peer tool receives too,
    else the sending side's."""
    if peer.measurement is not None and peer.measurement.receive_per_s is not None:
        return row.client_us, peer.client_us
    return row.send_us, peer.send_us


def ratios(row: ToolRow, rows: Sequence[ToolRow]) -> list[str]:
    """brokerbench's send rate and CPU per message, each divided by the peer's."""
    if row.tool != BROKERBENCH:
        return ["", ""]
    peer = peer_for(row, rows)
    if peer is None or peer.measurement is None:
        return ["-", "-"]
    if disturbed(peer, rows):
        return [DISTURBED, DISTURBED]
    ours = row.measurement.send_per_s if row.measurement else None
    theirs = peer.measurement.send_per_s
    send = _ratio(ours / theirs) if ours is not None and theirs else "-"
    our_us, their_us = compared_us(row, peer)
    cpu = _ratio(our_us / their_us) if our_us is not None and their_us else "-"
    return [send, cpu]


def cells(row: ToolRow, rows: Sequence[ToolRow]) -> list[str]:
    threads = "-" if row.threads is None else str(row.threads)
    tool = f"{row.tool} (standalone)" if row.reference else row.tool
    if row.error is not None and row.measurement is None:
        return [tool, threads, f"FAILED: {row.error}"]
    m, cpu = row.measurement, row.cpu
    assert m is not None
    return [
        tool,
        threads,
        _rate(m.send_per_s),
        _rate(m.receive_per_s),
        _ms(m.publish_p50_ms),
        _ms(m.publish_p99_ms),
        "-" if cpu is None else f"{cpu.client_pct:.0f}",
        "-" if cpu is None else f"{cpu.broker_pct:.0f}",
        "-" if cpu is None else _pct(cpu.other_pct),
        "-" if cpu is None else f"{cpu.wall_seconds:.1f}",
        "-" if cpu is None else cpu.scope,
        _us(row.send_us),
        _us(row.receive_us),
        _us(row.client_us),
        *ratios(row, rows),
    ]


def render(title: str, settings: Sequence[str], rows: Sequence[ToolRow]) -> str:
    """The whole block of one system: title, settings lines, the table, notes."""
    body = [cells(row, rows) for row in rows]
    widths = [len(h) for h in HEADER]
    for line in body:
        if len(line) == len(HEADER):
            widths = [max(w, len(c)) for w, c in zip(widths, line, strict=True)]

    def fmt(line: Sequence[str]) -> str:
        if len(line) < len(HEADER):  # a failed row: the message runs on
            head = [f"{line[0]:<{widths[0]}}", f"{line[1]:>{widths[1]}}"]
            return "  ".join([*head, *line[2:]])
        parts = [f"{line[0]:<{widths[0]}}"]
        parts += [f"{c:>{w}}" for c, w in zip(line[1:], widths[1:], strict=True)]
        return "  ".join(parts).rstrip()

    out = [title, *(f"  {s}" for s in settings), "", fmt(HEADER)]
    out.append("  ".join("-" * w for w in widths))
    out += [fmt(line) for line in body]
    notes: list[str] = []
    for row in rows:
        for note in row.measurement.notes if row.measurement else ():
            if note not in notes:
                notes.append(note)
        if row.error is not None and row.measurement is not None and row.error not in notes:
            notes.append(row.error)
    if any(disturbed(row, rows) for row in rows):
        notes.append(
            f"{DISTURBED}: a peer row below {UNDISTURBED:.0%} of the same tool's best run in "
            "this table (its standalone run first thing on the idle broker included) is left "
            "out of the ratios"
        )
    out += [f"  note: {n}" for n in notes]
    return "\n".join(out)
