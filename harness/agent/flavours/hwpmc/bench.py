"""hwpmc's part of ``invoke bench``: sweep latency and the highest rate with no bufferfull.

One 2-vCPU guest under TCG, default ``nsamples`` (32) and sweep period (4 ms); one SS PMC
per CPU under busy loops at rising per-CPU overflow rates::

    result = measure_hwpmc(arches.get("arm64"), images, cache)
    result["sweep_latency_ns"]             # per CPU: mean and max, overflow to swept
    result["max_no_bufferfull_rate_hz"]    # highest rate with no full ring on any CPU
    result["trials"]                       # per rate: seen, recorded, bufferfull, ...

The model says 32 entries per 4 ms: 8 kHz per CPU; under TCG the delivered rate (and so
where a ring first fills) follows the host's scheduling of vCPU threads, reported with the
undelivered periods. Only measured, never asserted: the numbers go into the bench JSON.
"""

from __future__ import annotations

import logging
from typing import Any

from harness.agent.build import build_agent
from harness.agent.driver import Agent
from harness.agent.flavours.hwpmc.plans import standard_plan
from harness.agent.flavours.hwpmc.results import HwRun
from harness.agent.flavours.hwpmc.run import hw_run
from harness.agent.profctl import build_profctl
from harness.agent.spec import AgentSpec
from harness.arches import ArchProfile
from harness.build.cache import Cache
from harness.build.images import GuestImages
from harness.timeouts import Timeouts
from harness.vm.argv import MachineSpec
from harness.vm.guest import Guest
from harness.vm.record import new_run_dir
from harness.vm.topology import default_topology

LOG = logging.getLogger(__name__)
BENCH_CPUS = 2
RUN_MS = 3000
#: Per-CPU overflow rates tried, lowest first (cycles at 1 GHz: period = 1e9 / rate).
RATES_HZ = (1_000, 2_000, 4_000, 6_000, 8_000, 10_000, 16_000)


def latency(run: HwRun) -> dict[str, dict[str, float]]:
    """Per CPU: mean and max time from an overflow to the sweep that took its entry."""
    out = {}
    for cpu, stats in sorted(run.snapshot.stats_percpu.items()):
        swept = stats["x_swept"]
        out[str(cpu)] = {
            "mean_ns": stats["x_sweep_lat_sum_ns"] / swept if swept else 0.0,
            "max_ns": float(stats["x_sweep_lat_max_ns"]),
            "swept": float(swept),
        }
    return out


def trial(run: HwRun) -> dict[str, Any]:
    """One rate's numbers, summed over the CPUs."""
    pc, core = run.snapshot.stats_percpu.values(), run.snapshot.core.values()
    return {
        "overflows_seen": sum(c["x_nmi_total"] for c in core),
        "periods_undelivered": sum(c["x_periods_undelivered"] for c in core),
        "recorded": sum(s["x_recorded"] for s in pc),
        "bufferfull": sum(s["x_bufferfull"] for s in pc),
        "restarts": sum(s["x_restarts"] for s in pc),
        "sweeps": sum(s["x_sweeps"] for s in pc),
        "stopped_ms": sum(c["x_source_stopped_ns"] for c in core) // 1_000_000,
        "sweep_latency_ns": latency(run),
    }


def measure_hwpmc(arch: ArchProfile, images: GuestImages, cache: Cache) -> dict[str, Any]:
    """Boot one guest and measure hwpmc's sweeps in it (about 1 minute)."""
    spec = MachineSpec(arch=arch, topology=default_topology(BENCH_CPUS), accel="tcg")
    workdir = new_run_dir("bench", f"hwpmc-{spec.name}")
    cpus = tuple(range(BENCH_CPUS))
    trials: dict[int, dict[str, Any]] = {}
    with Guest(spec, images, workdir, timeouts=Timeouts.from_env()) as guest:
        base = AgentSpec(flavour="hwpmc")
        agent = Agent(guest.shell, build_agent(base, images, cache), build_profctl(arch, cache),
                      workdir, nmi_expected=spec.nmi, pmu_irq_label=arch.pmu_interrupt_label,
                      cycles_per_ns=arch.cycles_per_ns("tcg"))  # fmt: skip
        agent.deploy()
        first = hw_run(agent, base, standard_plan(cpus, busy_ms=RUN_MS))
        for rate in RATES_HZ:
            run = hw_run(agent, AgentSpec(flavour="hwpmc", period=1_000_000_000 // rate),
                         standard_plan(cpus, busy_ms=RUN_MS))  # fmt: skip
            trials[rate] = trial(run)
            LOG.info("bench: hwpmc %d Hz per CPU: %s", rate, trials[rate])
            if trials[rate]["bufferfull"]:
                break
    clean = [rate for rate, t in trials.items() if not t["bufferfull"]]
    return {
        "guest": spec.name,
        "nsamples": base.param("nsamples"),
        "sweep_us": base.param("sweep_us"),
        "sweep_latency_ns": latency(first),
        "trials": {str(rate): t for rate, t in trials.items()},
        "max_no_bufferfull_rate_hz": max(clean, default=0),
    }
