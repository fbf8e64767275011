"""The one row of a global aggregate, typed: ``DataFrame.first()`` returns ``Row | None``, and an
aggregate without grouping always has exactly one row, so None there is Spark failing, not data."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, Row


def first_row(df: DataFrame, what: str) -> Row:
    """``df.first()``, for a frame that must have a row (a global ``agg``, a ``count`` query).

    Args:
        df: the frame (one Spark job runs).
        what: what the row is, for the error (``"the groups' sizes"``).
    Raises:
        RuntimeError: `df` has no row, naming `what`.
    """
    row = df.first()
    if row is None:
        raise RuntimeError(f"{what}: the aggregate returned no row")
    return row
