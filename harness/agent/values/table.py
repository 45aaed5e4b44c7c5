"""Text tables: every column right-aligned, as the reports and the mutation table print them.

A table is rows of cells, its first row the titles::

    align([("cpu", "seen"), ("0", "12")])     # ['cpu  seen', '  0    12']
"""

from __future__ import annotations

from collections.abc import Sequence


def align(table: Sequence[Sequence[str]]) -> list[str]:
    """Right-align every column to its widest cell, two spaces apart."""
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    return ["  ".join(cell.rjust(w) for cell, w in zip(row, widths, strict=True)) for row in table]
