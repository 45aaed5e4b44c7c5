"""The agent's part of ``invoke bench``: build-to-load time, handler cost, each flavour's own.

One 2-vCPU guest (this host's core count) under TCG. What no flavour owns is
measured with the default spec; then every flavour with a `Flavour.bench` gets the
module deployed and measures itself (`harness.agent.flavour.FlavourBench`), so a
new flavour adds its measurements in its own folder::

    result = measure_agents(arches.get("arm64"), images, cache, repeats=3)
    result["agent"]["render_build_load_s"]   # render + build (scratch cache) + deploy + insmod
    result["agent"]["nmi_handler_ns"]        # mean and max per overflow, the core's counters
    result["kprof"]["bytes_per_sample"]      # a flavour's own numbers, under its name
    bench_rows(result)                       # the table's lines for all of it

Only measured, never asserted: the numbers go into the bench JSON.
"""

from __future__ import annotations

import logging
import statistics
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.agent import flavours
from harness.agent.driver import Agent
from harness.agent.flavour import BenchRow, behaviour
from harness.agent.module.build import build_agent
from harness.agent.module.spec import AgentSpec
from harness.agent.profctl_build import build_profctl
from harness.arches import ArchProfile
from harness.builder.cache import Cache
from harness.builder.images import GuestImages
from harness.timeouts import Timeouts
from harness.vm.argv import MachineSpec
from harness.vm.guest import Guest
from harness.vm.record import new_run_dir
from harness.vm.topology import default_topology

LOG = logging.getLogger(__name__)
BENCH_CPUS = 2


def handler_cost(numbers: Mapping[str, int]) -> dict[str, float]:
    """Mean and max overflow-handler time per overflow, in ns, from a run's core counters."""

    def per_cpu(name: str) -> list[int]:
        return [v for k, v in numbers.items() if k.startswith("core.") and k.endswith(f".{name}")]

    total = sum(per_cpu("x_nmi_total"))
    return {
        "mean_ns": sum(per_cpu("x_nmi_sum_ns")) / total if total else 0.0,
        "max_ns": float(max(per_cpu("x_nmi_max_ns"), default=0)),
        "samples": float(total),
    }


def measure_agents(
    arch: ArchProfile, images: GuestImages, cache: Cache, repeats: int
) -> dict[str, Any]:
    """Boot one guest; measure the agent, then each flavour's own bench (minutes)."""
    spec = MachineSpec(arch=arch, topology=default_topology(BENCH_CPUS), accel="tcg")
    workdir = new_run_dir("bench", f"agent-{spec.name}")
    cpus = tuple(range(BENCH_CPUS))
    default = AgentSpec()
    with Guest(spec, images, workdir, timeouts=Timeouts.from_env()) as guest:
        profctl = build_profctl(arch, cache)
        loads = [_render_build_load(guest, images, profctl, workdir) for _ in range(repeats)]
        result: dict[str, Any] = {"agent": {"guest": spec.name, "render_build_load_s": {
            "median_s": statistics.median(loads), "min_s": min(loads), "max_s": max(loads),
            "samples": loads}}}  # fmt: skip
        for name in flavours.names():
            flavour = behaviour(name)
            if flavour.bench is None and name != default.flavour:
                continue
            (workdir / name).mkdir()
            agent = Agent(guest.shell, build_agent(AgentSpec(flavour=name), images, cache),
                          profctl, workdir / name, nmi_expected=spec.nmi,
                          pmu_irq_label=arch.pmu_interrupt_label,
                          cycles_per_ns=arch.cycles_per_ns("tcg"),
                          vmlinux=images.vmlinux)  # fmt: skip
            agent.deploy()
            if name == default.flavour:
                run = flavour.standard_run(agent, default, cpus)
                result["agent"]["nmi_handler_ns"] = handler_cost(run.numbers())
            if flavour.bench is not None:
                result[name] = {"guest": spec.name, **flavour.bench.measure(agent, cpus)}
    return result


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


def bench_rows(result: Mapping[str, Any]) -> list[BenchRow]:
    """The table's lines for the agent and for each flavour that measured itself."""
    rows: list[BenchRow] = []
    if agent := result.get("agent"):
        low, mid, high = (agent["render_build_load_s"][k] for k in ("min_s", "median_s", "max_s"))
        rows.append(("agent render + build + load", f"{mid:.2f}", f"{low:.2f}", f"{high:.2f}"))
        if cost := agent.get("nmi_handler_ns"):
            mean, most = cost["mean_ns"] / 1000, cost["max_ns"] / 1000
            rows.append(("agent handler per overflow, mean / max µs", f"{mean:.1f}", "",
                         f"{most:.1f}"))  # fmt: skip
    for name in flavours.names():
        bench = behaviour(name).bench
        if bench is not None and name in result:
            rows += bench.rows(result[name])
    return rows
