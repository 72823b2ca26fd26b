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
    "CPU s",
    "CPU over",
    "brokerbench ÷ peer",
)


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def _ms(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.3f}" if value < 10 else f"{value:,.1f}"


def peer_for(row: ToolRow, rows: Sequence[ToolRow]) -> ToolRow | None:
    """The peer row a brokerbench row is compared with: same threads, else the only one."""
    peers = [r for r in rows if r.tool != BROKERBENCH]
    same = [r for r in peers if r.threads == row.threads]
    if same:
        return same[0]
    unthreaded = [r for r in peers if r.threads is None]
    return unthreaded[0] if unthreaded else None


def ratio(row: ToolRow, rows: Sequence[ToolRow]) -> str:
    if row.tool != BROKERBENCH:
        return ""
    peer = peer_for(row, rows)
    ours = row.measurement.send_per_s if row.measurement else None
    theirs = peer.measurement.send_per_s if peer and peer.measurement else None
    if ours is None or not theirs:
        return "-"
    value = ours / theirs
    return f"{value:.3f}" if value < 10 else f"{value:,.1f}"


def cells(row: ToolRow, rows: Sequence[ToolRow]) -> list[str]:
    threads = "-" if row.threads is None else str(row.threads)
    if row.error is not None and row.measurement is None:
        return [row.tool, threads, f"FAILED: {row.error}"]
    m, cpu = row.measurement, row.cpu
    assert m is not None
    return [
        row.tool,
        threads,
        _rate(m.send_per_s),
        _rate(m.receive_per_s),
        _ms(m.publish_p50_ms),
        _ms(m.publish_p99_ms),
        "-" if cpu is None else f"{cpu.client_pct:.0f}",
        "-" if cpu is None else f"{cpu.broker_pct:.0f}",
        "-" if cpu is None else f"{cpu.wall_seconds:.1f}",
        "-" if cpu is None else cpu.scope,
        ratio(row, rows),
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
    out += [f"  note: {n}" for n in notes]
    return "\n".join(out)
