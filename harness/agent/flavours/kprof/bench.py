"""kprof's part of ``invoke bench``: bytes per sample written, and the drop-free rate.

It runs in the bench's guest (`harness.cli.agentbench`), at the default sizes (64 KiB
blocks, 64 MiB qlimit, depth 1) with one reader draining kpdata the whole time::

    result = KPROF_BENCH.measure(agent, cpus=(0, 1))
    result["bytes_per_sample"]            # bytes read ÷ trace records decoded
    result["max_dropfree_rate_hz"]        # highest nominal per-CPU rate with no block dropped
    result["max_dropfree_delivered_hz_per_cpu"]   # the overflows TCG delivered at those rates
    result["trials"]                      # per rate: overflows, records, drops, nospare

Only measured, never asserted: the numbers go into the bench JSON.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from harness.agent import profctl
from harness.agent.flavour import AgentLike, BenchRow, FlavourBench
from harness.agent.flavours.kprof.results import KprofRun
from harness.agent.flavours.kprof.run import KprofPlan, kprof_run
from harness.agent.module.spec import AgentSpec

LOG = logging.getLogger(__name__)
RUN_MS = 5_000
#: Per-CPU overflow rates tried, lowest first (cycles at 1 GHz: period = 1e9 / rate).
#: Nominal: the emulator delivers a fraction (measured: 6.6k of 10k/s at 1 kHz x 2 CPUs x 5 s,
#: 36k of 500k at 50 kHz), so the drop-free figure is bounded by delivery, not by kprof.
RATES_HZ = (1_000, 5_000, 10_000, 20_000, 50_000)


def trial(run: KprofRun, cpus: int) -> dict[str, float]:
    """One rate's numbers on ``cpus`` CPUs: what the PMU raised, was recorded, read, lost."""
    final = run.last
    seen = sum(c.get("x_nmi_total", 0) for c in run.core.values())
    records = len(run.trace)
    return {
        "overflows_seen": seen,
        # what the emulator delivered: under TCG far below the nominal rate
        "delivered_hz_per_cpu": seen / (cpus * RUN_MS / 1000),
        "committed": final.total("x_records_committed"),
        "blocks_full": final.total("x_blocks_full"),
        "blocks_dropped": final.total("x_hidden_blocks_dropped"),
        "records_nospare": final.total("x_records_nospare"),
        "periods_undelivered": sum(c.get("x_periods_undelivered", 0) for c in run.core.values()),
        "bytes_read": run.bytes_read,
        "records_read": records,
        "bytes_per_sample": run.bytes_read / records if records else 0.0,
    }


def measure(agent: AgentLike, cpus: tuple[int, ...]) -> dict[str, Any]:
    """Kprof at rising rates on ``cpus`` until a block is dropped (about a minute)."""
    trials: dict[int, dict[str, float]] = {}
    body = (*(profctl.spin_step(cpu, RUN_MS) for cpu in cpus), profctl.sleep_step(RUN_MS + 200))
    for rate in RATES_HZ:
        run_spec = AgentSpec(flavour="kprof", period=1_000_000_000 // rate)
        plan = KprofPlan(body=body, background_reader=True)
        result = trial(kprof_run(agent, run_spec, plan), len(cpus))
        trials[rate] = result
        LOG.info("bench: kprof at %d Hz per CPU: %s", rate, result)
        if result["blocks_dropped"] or result["records_nospare"]:
            break
    passed = [r for r, t in trials.items() if not (t["blocks_dropped"] or t["records_nospare"])]
    read = sum(t["bytes_read"] for t in trials.values())
    records = sum(t["records_read"] for t in trials.values())
    return {
        "run_ms": RUN_MS,
        "bytes_per_sample": read / records if records else 0.0,
        "max_dropfree_rate_hz": max(passed, default=0),
        "max_dropfree_delivered_hz_per_cpu": max(
            (trials[r]["delivered_hz_per_cpu"] for r in passed), default=0.0
        ),
        "trials": {str(rate): t for rate, t in trials.items()},
    }


def rows(result: Mapping[str, Any]) -> list[BenchRow]:
    """The table's lines for what `measure` returned."""
    return [
        ("kprof bytes per sample read", f"{result['bytes_per_sample']:.1f}", "", ""),
        ("kprof no-drop rate per CPU, 1 reader (Hz)", str(result["max_dropfree_rate_hz"]), "", ""),
    ]


KPROF_BENCH = FlavourBench(measure=measure, rows=rows)
