"""Live progress on the terminal while a sweep point runs: rates, totals, elapsed time.

On a terminal the line is redrawn in place every second; otherwise (CI, logs) a line is
printed every ``log_every`` seconds.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

from workload.node import Progress


class ProgressView:
    def __init__(self, label: str, stream: TextIO = sys.stderr, log_every: float = 5.0) -> None:
        self.label = label
        self.stream = stream
        self.tty = stream.isatty()
        self.log_every = log_every
        self.start = time.monotonic()
        self.latest: dict[tuple[str, int, int], Progress] = {}
        self.last_print = 0.0
        self.last_totals = (0, 0, self.start)
        self.rates = (0.0, 0.0)

    def update(self, item: Progress) -> None:
        self.latest[(item.role, item.node, item.part)] = item

    def totals(self) -> tuple[int, int, int]:
        values = self.latest.values()
        return (
            sum(p.sent for p in values),
            sum(p.received for p in values),
            sum(p.errors for p in values),
        )

    def tick(self) -> None:
        now = time.monotonic()
        if now - self.last_print < (1.0 if self.tty else self.log_every):
            return
        sent, received, errors = self.totals()
        last_sent, last_received, last_t = self.last_totals
        dt = max(1e-6, now - last_t)
        self.rates = ((sent - last_sent) / dt, (received - last_received) / dt)
        self.last_totals = (sent, received, now)
        self.last_print = now
        line = (
            f"  {self.label}  {now - self.start:5.0f} s  sent {sent:,} ({self.rates[0]:,.0f}/s)"
            f"  received {received:,} ({self.rates[1]:,.0f}/s)  errors {errors:,}"
        )
        self._write("\r\033[K" + line if self.tty else line + "\n")

    def close(self) -> None:
        self.last_print = 0.0
        self.tick()
        if self.tty:
            self._write("\n")

    def _write(self, text: str) -> None:
        """Progress is a courtesy: a closed terminal or pipe must not stop the run."""
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):
            pass
