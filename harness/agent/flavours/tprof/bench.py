"""The agent's part of ``invoke bench``: handler cost, drop-free rate, build-to-load time.

All three run in one 2-vCPU guest (this host's core count), under TCG::

    result = measure_agent(arches.get("arm64"), images, cache, repeats=3)
    result["nmi_handler_ns"]           # mean and max per sample, from the agent's counters
    result["max_dropfree_rate_hz"]     # highest per-CPU rate with no drop for 10 s
    result["dropfree_trials"]          # per rate: seen, recorded, undelivered (the PMU's loss)
    result["render_build_load_s"]      # summary of render + build + deploy + insmod

Only measured, never asserted: the numbers go into the bench JSON.
"""

from __future__ import annotations

import logging
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from harness.agent.build import build_agent
from harness.agent.driver import Agent
from harness.agent.flavours.tprof.data import TPROF_DROP_CAUSES
from harness.agent.flavours.tprof.results import SamplingRun
from harness.agent.flavours.tprof.run import sampling_run
from harness.agent.profctl import build_profctl
from harness.agent.spec import AgentSpec
from harness.agent.steps import SamplingPlan
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
DROPFREE_RUN_MS = 10_000
#: Per-CPU overflow rates tried, lowest first (cycles at 1 GHz: period = 1e9 / rate).
RATES_HZ = (250, 500, 1_000, 2_000, 5_000, 10_000, 20_000)


def drops(run: SamplingRun) -> int:
    """Every producer call that did not end in a recorded sample, all CPUs."""
    return sum(
        run.snapshot.stats_percpu[cpu].get(name, 0)
        for cpu in run.snapshot.stats_percpu
        for name, _ in TPROF_DROP_CAUSES
    )


def handler_cost(run: SamplingRun) -> dict[str, float]:
    """Mean and max overflow-handler time per sample, in ns, over all CPUs."""
    core = run.snapshot.core.values()
    total = sum(c["x_nmi_total"] for c in core)
    return {
        "mean_ns": sum(c["x_nmi_sum_ns"] for c in core) / total if total else 0.0,
        "max_ns": float(max(c["x_nmi_max_ns"] for c in core)),
        "samples": float(total),
    }


def measure_agent(
    arch: ArchProfile, images: GuestImages, cache: Cache, repeats: int
) -> dict[str, Any]:
    """Boot one guest and measure the agent in it (about 2 minutes)."""
    spec = MachineSpec(arch=arch, topology=default_topology(BENCH_CPUS), accel="tcg")
    workdir = new_run_dir("bench", f"agent-{spec.name}")
    with Guest(spec, images, workdir, timeouts=Timeouts.from_env()) as guest:
        profctl = build_profctl(arch, cache)
        loads = [_render_build_load(guest, images, profctl, workdir) for _ in range(repeats)]
        agent = Agent(guest.shell, build_agent(AgentSpec(), images, cache), profctl, workdir,
                      nmi_expected=spec.nmi, pmu_irq_label=arch.pmu_interrupt_label,
                      cycles_per_ns=arch.cycles_per_ns("tcg"))  # fmt: skip
        agent.deploy()
        cost = handler_cost(sampling_run(agent, AgentSpec(), SamplingPlan(busy_cpus=(0, 1))))
        rates = _dropfree_rates(agent)
    passed = [rate for rate, r in rates.items() if not (r["drops"] or r["throttled"])]
    return {
        "guest": spec.name,
        "render_build_load_s": _summary(loads),
        "nmi_handler_ns": cost,
        "dropfree_trials": {str(rate): result for rate, result in rates.items()},
        "max_dropfree_rate_hz": max(passed, default=0),
    }


def _render_build_load(guest: Guest, images: GuestImages, profctl: Path, workdir: Path) -> float:
    """Render, build (in a scratch cache: nothing reused), deploy and insmod, in seconds."""
    with tempfile.TemporaryDirectory(prefix="bench-agent-") as scratch:
        started = time.monotonic()
        build = build_agent(AgentSpec(), images, Cache(Path(scratch)))
        agent = Agent(guest.shell, build, profctl, workdir, nmi_expected=True,
                      pmu_irq_label=images.arch.pmu_interrupt_label)  # fmt: skip
        agent.deploy()
        agent.load(AgentSpec())
        took = time.monotonic() - started
        agent.unload()
    LOG.info("bench: render + build + load %.2fs", took)
    return took


def _dropfree_rates(agent: Agent) -> dict[int, dict[str, float]]:
    """Per rate: drops, undelivered and throttled periods over a 10 s run, busy on every CPU.

    Stops at the first rate with a drop (a producer call not recorded) or a
    throttled overflow. Undelivered periods (the vCPU took the overflow more than
    a period late, so the driver restarted the period) are reported, not judged:
    under TCG they follow the host's scheduling of vCPU threads.
    """
    results: dict[int, dict[str, float]] = {}
    plan = SamplingPlan(busy_cpus=tuple(range(BENCH_CPUS)), busy_ms=DROPFREE_RUN_MS)
    for rate in RATES_HZ:
        run = sampling_run(agent, AgentSpec(period=1_000_000_000 // rate), plan)
        seen = sum(c["x_nmi_total"] for c in run.snapshot.core.values())
        undelivered = sum(c["x_periods_undelivered"] for c in run.snapshot.core.values())
        throttled = sum(c["x_throttled"] for c in run.snapshot.core.values())
        results[rate] = {
            "drops": drops(run),
            "overflows_seen": seen,
            "periods_undelivered": undelivered,
            "throttled": throttled,
            "recorded": run.snapshot.stats["sample"],
        }
        LOG.info("bench: %d Hz per CPU: %s", rate, results[rate])
        if drops(run) or throttled:
            break
    return results


def _summary(samples: list[float]) -> dict[str, Any]:
    return {"median_s": statistics.median(samples), "min_s": min(samples),
            "max_s": max(samples), "samples": samples}  # fmt: skip
