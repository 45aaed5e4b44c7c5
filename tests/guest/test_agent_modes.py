"""profagent across kernel modes: the NMI A/B, perf throttling, no PMU at all.

The A/B boots two guests of the same kernel, pseudo-NMI on and off, and runs the
same workload in both: on, every producer call is in NMI and the IRQ-off probe
catches overflows; off, none is and it catches none. Every flavour on the debug
kernel (lockdep, atomic-sleep, kmemleak, KASAN, UBSAN) is `test_sanitizers.py`'s,
run with ``--variant debug``.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness import arches, timing
from harness.agent.driver import Agent
from harness.agent.flavour import behaviour
from harness.agent.flavours.tprof.report import throttle_lost
from harness.agent.flavours.tprof.results import TprofRun
from harness.agent.flavours.tprof.run import tprof_run
from harness.agent.module.build import build_agent
from harness.agent.module.spec import AgentSpec
from harness.agent.oracles.report import unjudged
from harness.agent.profctl_build import build_profctl
from harness.agent.steps import SamplingPlan
from harness.builder.cache import Cache
from harness.builder.images import GuestImages, prepare_images
from harness.builder.kernel import KernelRequest, find_kernel
from harness.errors import ConfigError
from harness.timeouts import Timeouts
from harness.vm.argv import MachineSpec
from harness.vm.snapstore import SnapshotStore, running_guest
from harness.vm.topology import CpuTopology

pytestmark = pytest.mark.guest
TWO_SOCKETS = CpuTopology(sockets=2, cores=1, threads=1)
PLAN = SamplingPlan(busy_cpus=(0,), probe_cpus=(1,), busy_ms=1000)
#: What the A/B relies on in both guests: every overflow counted, in the context its mode
#: gives, and the IRQ-off probe's window (hit with pseudo-NMI on, missed with it off).
AB_RELIED = ("IRQ", "CALLS", "NMI", "PROBE")


def report(run: TprofRun, request: pytest.FixtureRequest, title: str,
           relied: tuple[str, ...]) -> list[str]:  # fmt: skip
    """The run's table and verdicts (each PASS with its count) kept with the test.

    Its problems: every violation, and every oracle of ``relied`` that compared nothing.
    """
    tprof = behaviour("tprof")
    violations = tprof.check(run)
    text = f"{title}\n{tprof.report(run, violations)}"
    request.node.user_properties.append(("profagent-report", text))
    return [str(v) for v in violations] + unjudged(tprof.judged(run), relied)


@contextlib.contextmanager
def booted_agent(
    spec: MachineSpec, images: GuestImages, workdir: Path, cache: Cache,
    timeouts: Timeouts, snapshots: SnapshotStore | None,
) -> Iterator[Agent]:  # fmt: skip
    """A fresh guest of ``spec`` with the agent deployed, for one ``with`` block.

    The guest is restored from its snapshot unless the run boots cold (``snapshots``
    None). However the block ends (a failed assert too), leaving it stops QEMU by its
    PID (`Guest.__exit__`) and scans the console; the agent is unloaded first if it passed.
    """
    with contextlib.ExitStack() as stack:
        with timing.stage(timing.BOOT):  # restored or booted, and checked: not the test's own
            guest = stack.enter_context(running_guest(spec, images, workdir, timeouts=timeouts,
                                                      snapshots=snapshots))  # fmt: skip
        agent = Agent(
            guest.shell,
            build_agent(AgentSpec(), images, cache),
            build_profctl(spec.arch, cache),
            workdir,
            nmi_expected=spec.nmi,
            pmu_irq_label=spec.arch.pmu_interrupt_label,
            cycles_per_ns=spec.arch.cycles_per_ns(spec.accel),
            timeouts=timeouts,
            vmlinux=images.vmlinux,
        )
        agent.deploy()
        yield agent
        agent.unload()


def test_nmi_a_b_on_the_same_kernel(
    base_setup: tuple[MachineSpec, GuestImages],
    cache: Cache,
    timeouts: Timeouts,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    snapshots: SnapshotStore | None,
) -> None:
    base, images = base_setup
    if base.arch.pseudo_nmi_arg is None:
        pytest.skip(f"{base.arch.name} has no pseudo-NMI switch; its PMU NMIs are always NMIs: "
                    "on arm64, `invoke test --arch arm64 -k test_nmi_a_b_on`")  # fmt: skip
    runs = {}
    for nmi in (True, False):
        spec = dataclasses.replace(base, topology=TWO_SOCKETS, nmi=nmi)
        with booted_agent(spec, images, tmp_path / f"nmi-{nmi}", cache, timeouts,
                          snapshots) as agent:  # fmt: skip
            runs[nmi] = tprof_run(agent, AgentSpec(), PLAN)
    problems = []
    for nmi, run in runs.items():
        problems += report(run, request, f"pseudo-NMI {'on' if nmi else 'off'}", AB_RELIED)
    assert not problems, "\n".join(problems)
    on, off = runs[True].counters.core, runs[False].counters.core
    assert all(c["x_producer_calls_nmi"] == c["x_producer_calls"] for c in on.values())
    assert on[1]["x_probe_hits"] > 0
    assert sum(c["x_producer_calls"] for c in off.values()) > 0
    assert all(c["x_producer_calls_nmi"] == 0 for c in off.values())
    assert all(c["x_nmi_ctx_bad"] == c["x_nmi_total"] for c in off.values())
    assert off[1]["x_probe_runs"] == 1
    assert off[1]["x_probe_hits"] == 0


def test_throttling_left_on_loses_overflows_visibly(
    agent: Agent, topology: CpuTopology, request: pytest.FixtureRequest
) -> None:
    """A sample-rate limit below the overflow rate: the losses show up, and are counted.

    The busy CPU raises 5000 periods/s (200 000 cycles at 1 GHz). Even with 8 vCPUs
    on 2 host cores the emulator delivers about a third of them (design §2), about
    6.7 per 4 ms tick; the perf core allows max_sample_rate / HZ = 1000 / 250 = 4 per
    tick, so it must throttle on the small layout and the large one alike.
    """
    if topology.cpus not in (2, 8):
        pytest.skip("the throttling case runs on the 2- and 8-CPU layouts: "
                    "`invoke test --cpus 2 -k test_throttling_left_on`")  # fmt: skip
    plan = dataclasses.replace(PLAN, probe_cpus=(), throttling_disabled=False, max_sample_rate=1000)
    run = tprof_run(agent, AgentSpec(period=200_000), plan)
    problems = report(
        run,
        request,
        "throttling on, 1000 samples/s allowed, ~5000/s raised",
        ("IRQ", "CALLS"),  # THROTTLE applies with throttling off; the asserts below judge it
    )
    assert not problems, "\n".join(problems)
    assert run.counters.core[0]["x_throttled"] > 0
    assert throttle_lost(run)[0] > 0


def test_software_clock_where_there_is_no_pmu(
    cache: Cache, timeouts: Timeouts, tmp_path: Path, request: pytest.FixtureRequest,
    snapshots: SnapshotStore | None,
) -> None:  # fmt: skip
    """x86_64 under TCG has no PMU: cycles is refused up front, cpu-clock samples."""
    x86 = arches.get("x86_64")
    if find_kernel(KernelRequest(arch=x86, variant="default"), cache) is None:
        pytest.skip("no x86_64 kernel in the cache; `invoke kernel --arch x86_64` builds it")
    images = prepare_images(x86, "default", cache)
    spec = MachineSpec(arch=x86, topology=TWO_SOCKETS, accel="tcg")
    with booted_agent(spec, images, tmp_path / "x86", cache, timeouts, snapshots) as agent:
        with pytest.raises(ConfigError, match="needs a PMU and the guest has none"):
            agent.load(AgentSpec())
        run = tprof_run(agent, AgentSpec(event="cpu-clock"), PLAN)
        problems = report(run, request, "x86_64 TCG, software clock", ("CALLS", "TP-O1"))
    assert run.counters.info["source"] == "software-clock (no PMU)"
    assert run.counters.stats["sample"] > 0
    assert not problems, "\n".join(problems)
