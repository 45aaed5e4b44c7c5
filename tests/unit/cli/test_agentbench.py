"""`invoke bench`'s agent part: the handler cost from the core's counters, each flavour's rows."""

from __future__ import annotations

from harness.agent import flavours
from harness.agent.flavour import behaviour
from harness.cli.agentbench import bench_rows, handler_cost


def test_the_handler_cost_is_the_total_time_over_the_overflows_of_every_cpu() -> None:
    numbers = {"core.0.x_nmi_total": 3, "core.0.x_nmi_sum_ns": 3000, "core.0.x_nmi_max_ns": 1500,
               "core.1.x_nmi_total": 1, "core.1.x_nmi_sum_ns": 5000, "core.1.x_nmi_max_ns": 5000,
               "stats.x_nmi_total": 99, "percpu.0.x_nmi_sum_ns": 7}  # fmt: skip
    assert handler_cost(numbers) == {"mean_ns": 2000.0, "max_ns": 5000.0, "samples": 4.0}


def test_no_overflow_is_no_cost_rather_than_a_division_by_zero() -> None:
    assert handler_cost({}) == {"mean_ns": 0.0, "max_ns": 0.0, "samples": 0.0}


def test_each_flavour_that_measured_itself_adds_its_own_rows() -> None:
    agent = {"render_build_load_s": {"median_s": 2.0, "min_s": 1.5, "max_s": 3.0},
             "nmi_handler_ns": {"mean_ns": 1500.0, "max_ns": 9000.0}}  # fmt: skip
    kprof = {"bytes_per_sample": 34.0, "max_dropfree_rate_hz": 20_000}
    rows = bench_rows({"agent": agent, "kprof": kprof})
    assert rows[:2] == [
        ("agent render + build + load", "2.00", "1.50", "3.00"),
        ("agent handler per overflow, mean / max µs", "1.5", "", "9.0"),
    ]
    assert rows[2:] == behaviour("kprof").bench.rows(kprof)  # type: ignore[union-attr]
    assert [row[0].split()[0] for row in rows[2:]] == ["kprof", "kprof"]


def test_every_flavour_with_a_bench_is_found_through_the_registry() -> None:
    assert {n for n in flavours.names() if behaviour(n).bench} >= {"tprof", "kprof", "hwpmc"}
