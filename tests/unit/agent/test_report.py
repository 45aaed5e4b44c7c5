"""What the flavours' reports share: the ``all`` row, nmi% and deliv%, matrix cells."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from harness.agent.report import CellRow, OverflowShares, total_row


@dataclass(frozen=True, slots=True)
class Row(OverflowShares):
    cpu: int | None
    seen: int
    nmi_ok: int
    undelivered: int
    irq: int | None
    label: str


ROWS = (Row(0, 90, 90, 10, 90, "a"), Row(1, 10, 5, 0, None, "b"))


def test_the_all_row_sums_ints_and_keeps_what_it_is_given() -> None:
    total = total_row(Row, ROWS, label="all")
    assert total == Row(None, 100, 95, 10, None, "all")  # a CPU without irq: no irq sum
    assert (total.nmi_pct, total.delivered_pct) == (95.0, 90.9)


def test_a_field_with_no_sum_must_be_kept() -> None:
    with pytest.raises(TypeError, match=r"Row\.label"):
        total_row(Row, ROWS)


def test_no_overflow_has_no_shares() -> None:
    row = Row(0, 0, 0, 0, 0, "a")
    assert (row.nmi_pct, row.delivered_pct) == (None, None)


def test_a_cell_row_takes_the_core_counters_and_the_flavours_own() -> None:
    core = {"x_nmi_total": 8, "x_nmi_ctx_ok": 6, "x_periods_undelivered": 2}
    row = CellRow.from_core(3, core, irq=8, recorded=7, drops={"overflow": 1})
    assert row.as_dict() == {"cpu": 3, "irq": 8, "overflows": 8, "recorded": 7, "undelivered": 2,
                             "drops": {"overflow": 1}, "nmi_share": 0.75}  # fmt: skip
    assert CellRow.from_core(0, {}, irq=None, recorded=0, drops={}).nmi_share is None
