"""One sweep point's row of ``summary.csv``, typed (:class:`SummaryRow`): what the analysis
job returns and every reader of a summary takes; some of its columns as a step of the job
makes them (:class:`Figures`); reading a ``summary.csv`` back, with the column names of
earlier summaries brought up to today's (:func:`read_summary_csv`)."""

from __future__ import annotations

import csv
import inspect
import math
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from analysis.column_model import METRICS, run_column, window_column
from analysis.columns import COLUMNS, SUMMARY_COLUMNS

#: Earlier names of columns, as summaries written before the scopes were named hold them.
LEGACY = {
    **{f"{m}_p95_ms": window_column(m) for m in METRICS},
    **{f"{m}_{q}_ms": run_column(m, q) for m in METRICS for q in ("p50", "p99", "p999", "max")},
}

V = TypeVar("V")


def upgrade(row: Mapping[str, V]) -> dict[str, V]:
    """A summary row with today's column names (a row of today's summaries is unchanged)."""
    if any(column in row for column in (window_column(m) for m in METRICS)):
        return dict(row)
    return {LEGACY.get(key, key): value for key, value in row.items()}


def number(value: object) -> float | None:
    """A summary cell (or any loosely typed figure) as a number: None when empty, not a
    number, or NaN."""
    if value in (None, ""):
        return None
    try:
        result = float(str(value))
    except (TypeError, ValueError):
        return None
    return None if math.isnan(result) else result


class SummaryRow(Mapping[str, Any]):
    """One sweep point's row of ``summary.csv``: every column of :data:`COLUMNS` and no
    other, each as the analysis computed it or as read back from the file (text). A column
    without a figure holds None or "" (a summary written before the column existed: None).
    Read by column (``row[c]``, ``row.get(c)``), as an attribute (``row.lost``: a name that
    is no column raises AttributeError naming it) or typed (:meth:`figure`, :attr:`point`)."""

    __slots__ = ("_cells",)

    def __init__(self, cells: Mapping[str, Any]) -> None:
        unknown = cells.keys() - COLUMNS.keys()
        if unknown:
            raise ValueError(f"not a column of summary.csv: {', '.join(sorted(unknown))}")
        self._cells: dict[str, Any] = {c: cells.get(c) for c in SUMMARY_COLUMNS}

    def __getitem__(self, column: str) -> Any:
        return self._cells[column]

    def __getattr__(self, column: str) -> Any:
        # Only called for names that are no attribute of the class: the columns.
        if column.startswith("_"):
            raise AttributeError(column)
        try:
            return self._cells[column]
        except KeyError:
            raise AttributeError(f"not a column of summary.csv: {column}") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._cells)

    def __len__(self) -> int:
        return len(self._cells)

    def __repr__(self) -> str:
        filled = {k: v for k, v in self._cells.items() if v not in (None, "")}
        return f"SummaryRow({filled!r})"

    def figure(self, column: str) -> float | None:
        """The column as a number (None: no figure)."""
        return number(self._cells[column])

    @property
    def point(self) -> int:
        """The sweep point's index in the run."""
        return int(self._cells["point"])

    def merged(self, cells: Mapping[str, Any]) -> SummaryRow:
        """This row with ``cells`` in place of its own (a name that is no column raises)."""
        return SummaryRow({**self._cells, **cells})


class Figures(Mapping[str, Any]):
    """Some columns of one point's row as a step of the analysis job makes them: a frozen
    dataclass (``eq=False``) whose every field is a column — one that is not raises KeyError
    when the class is defined, at import — read as a mapping of its columns."""

    #: The fields' columns, in order.
    columns: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.columns = tuple(COLUMNS[name].name for name in inspect.get_annotations(cls))

    def __getitem__(self, column: str) -> Any:
        if column not in self.columns:
            raise KeyError(column)
        return getattr(self, column)

    def __iter__(self) -> Iterator[str]:
        return iter(self.columns)

    def __len__(self) -> int:
        return len(self.columns)


def read_summary_csv(path: Path) -> list[SummaryRow]:
    """The rows of a ``summary.csv``, with today's column names."""
    with path.open(newline="") as f:
        return [SummaryRow(upgrade(row)) for row in csv.DictReader(f)]
