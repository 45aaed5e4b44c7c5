"""tprof's part of ``invoke bench``: the highest per-CPU rate that runs 10 s without a drop.

It runs in the bench's guest (`harness.cli.agentbench`), busy loops on every CPU, at
rising per-CPU overflow rates until one drops a producer call or throttles::

    result = TPROF_BENCH.measure(agent, cpus=(0, 1))
    result["max_dropfree_rate_hz"]     # highest per-CPU rate with no drop for 10 s
    result["dropfree_trials"]          # per rate: seen, recorded, undelivered (the PMU's loss)

Only measured, never asserted: the numbers go into the bench JSON.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from harness.agent.flavour import AgentLike, BenchRow, FlavourBench
from harness.agent.flavours.tprof.data import TPROF_DROP_CAUSES
from harness.agent.flavours.tprof.results import TprofRun
from harness.agent.flavours.tprof.run import tprof_run
from harness.agent.module.spec import AgentSpec
from harness.agent.steps import SamplingPlan

LOG = logging.getLogger(__name__)
DROPFREE_RUN_MS = 10_000
#: Per-CPU overflow rates tried, lowest first (cycles at 1 GHz: period = 1e9 / rate).
RATES_HZ = (250, 500, 1_000, 2_000, 5_000, 10_000, 20_000)


def drops(run: TprofRun) -> int:
    """Every producer call that did not end in a recorded sample, all CPUs."""
    return sum(
        run.counters.stats_percpu[cpu].get(name, 0)
        for cpu in run.counters.stats_percpu
        for name, _ in TPROF_DROP_CAUSES
    )


def measure(agent: AgentLike, cpus: tuple[int, ...]) -> dict[str, Any]:
    """Per rate: drops, undelivered and throttled periods over a 10 s run, busy on ``cpus``.

    Stops at the first rate with a drop (a producer call not recorded) or a
    throttled overflow. Undelivered periods (the vCPU took the overflow more than
    a period late, so the driver restarted the period) are reported, not judged:
    under TCG they follow the host's scheduling of vCPU threads.
    """
    results: dict[int, dict[str, float]] = {}
    plan = SamplingPlan(busy_cpus=cpus, busy_ms=DROPFREE_RUN_MS)
    for rate in RATES_HZ:
        run = tprof_run(agent, AgentSpec(period=1_000_000_000 // rate), plan)
        core = run.counters.core.values()
        throttled = sum(c["x_throttled"] for c in core)
        results[rate] = {
            "drops": drops(run),
            "overflows_seen": sum(c["x_nmi_total"] for c in core),
            "periods_undelivered": sum(c["x_periods_undelivered"] for c in core),
            "throttled": throttled,
            "recorded": run.counters.stats["sample"],
        }
        LOG.info("bench: tprof %d Hz per CPU: %s", rate, results[rate])
        if results[rate]["drops"] or throttled:
            break
    passed = [rate for rate, r in results.items() if not (r["drops"] or r["throttled"])]
    return {
        "dropfree_trials": {str(rate): result for rate, result in results.items()},
        "max_dropfree_rate_hz": max(passed, default=0),
    }


def rows(result: Mapping[str, Any]) -> list[BenchRow]:
    """The table's line for what `measure` returned."""
    return [
        ("tprof drop-free rate per CPU, 10 s (Hz)", str(result["max_dropfree_rate_hz"]), "", "")
    ]


TPROF_BENCH = FlavourBench(measure=measure, rows=rows)
