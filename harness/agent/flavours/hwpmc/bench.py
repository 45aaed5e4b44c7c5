"""hwpmc's part of ``invoke bench``: sweep latency and the highest rate with no bufferfull.

It runs in the bench's guest (`harness.cli.agentbench`) with the default ``nsamples``
(32) and sweep period (4 ms): one SS PMC per CPU under busy loops at rising per-CPU
overflow rates::

    result = HWPMC_BENCH.measure(agent, cpus=(0, 1))
    result["sweep_latency_ns"]             # per CPU: mean and max, overflow to swept
    result["max_no_bufferfull_rate_hz"]    # highest rate with no full ring on any CPU
    result["trials"]                       # per rate: seen, recorded, bufferfull, ...

The model says 32 entries per 4 ms: 8 kHz per CPU; under TCG the delivered rate (and so
where a ring first fills) follows the host's scheduling of vCPU threads, reported with the
undelivered periods. Only measured, never asserted: the numbers go into the bench JSON.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from harness.agent.flavour import AgentLike, BenchRow, FlavourBench
from harness.agent.flavours.hwpmc.plans import standard_plan
from harness.agent.flavours.hwpmc.results import HwpmcRun
from harness.agent.flavours.hwpmc.run import hwpmc_run
from harness.agent.module.spec import AgentSpec

LOG = logging.getLogger(__name__)
RUN_MS = 3000
#: Per-CPU overflow rates tried, lowest first (cycles at 1 GHz: period = 1e9 / rate).
RATES_HZ = (1_000, 2_000, 4_000, 6_000, 8_000, 10_000, 16_000)


def latency(run: HwpmcRun) -> dict[str, dict[str, float]]:
    """Per CPU: mean and max time from an overflow to the sweep that took its entry."""
    out = {}
    for cpu, stats in sorted(run.counters.stats_percpu.items()):
        swept = stats["x_swept"]
        out[str(cpu)] = {
            "mean_ns": stats["x_sweep_lat_sum_ns"] / swept if swept else 0.0,
            "max_ns": float(stats["x_sweep_lat_max_ns"]),
            "swept": float(swept),
        }
    return out


def trial(run: HwpmcRun) -> dict[str, Any]:
    """One rate's numbers, summed over the CPUs."""
    percpu, core = run.counters.stats_percpu.values(), run.counters.core.values()
    return {
        "overflows_seen": sum(c["x_nmi_total"] for c in core),
        "periods_undelivered": sum(c["x_periods_undelivered"] for c in core),
        "recorded": sum(s["x_recorded"] for s in percpu),
        "bufferfull": sum(s["x_bufferfull"] for s in percpu),
        "restarts": sum(s["x_restarts"] for s in percpu),
        "sweeps": sum(s["x_sweeps"] for s in percpu),
        "stopped_ms": sum(c["x_source_stopped_ns"] for c in core) // 1_000_000,
        "sweep_latency_ns": latency(run),
    }


def measure(agent: AgentLike, cpus: tuple[int, ...]) -> dict[str, Any]:
    """Hwpmc's sweeps at the default rate, then at rising rates until a ring fills."""
    trials: dict[int, dict[str, Any]] = {}
    base = AgentSpec(flavour="hwpmc")
    first = hwpmc_run(agent, base, standard_plan(cpus, busy_ms=RUN_MS))
    for rate in RATES_HZ:
        run = hwpmc_run(agent, AgentSpec(flavour="hwpmc", period=1_000_000_000 // rate),
                     standard_plan(cpus, busy_ms=RUN_MS))  # fmt: skip
        trials[rate] = trial(run)
        LOG.info("bench: hwpmc %d Hz per CPU: %s", rate, trials[rate])
        if trials[rate]["bufferfull"]:
            break
    clean = [rate for rate, t in trials.items() if not t["bufferfull"]]
    return {
        "nsamples": base.param("nsamples"),
        "sweep_us": base.param("sweep_us"),
        "sweep_latency_ns": latency(first),
        "trials": {str(rate): t for rate, t in trials.items()},
        "max_no_bufferfull_rate_hz": max(clean, default=0),
    }


def rows(result: Mapping[str, Any]) -> list[BenchRow]:
    """The table's lines: latency per CPU (mean / max ms) and the no-bufferfull rate."""
    out: list[BenchRow] = []
    for cpu, lat in sorted(result["sweep_latency_ns"].items(), key=lambda kv: int(kv[0])):
        mean, most = lat["mean_ns"] / 1e6, lat["max_ns"] / 1e6
        out.append((f"hwpmc overflow to swept, CPU {cpu}, mean / max ms", f"{mean:.2f}", "",
                    f"{most:.2f}"))  # fmt: skip
    out.append(("hwpmc no-bufferfull rate per CPU (Hz)",
                str(result["max_no_bufferfull_rate_hz"]), "", ""))  # fmt: skip
    return out


HWPMC_BENCH = FlavourBench(measure=measure, rows=rows)
