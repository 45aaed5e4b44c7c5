"""profagent's tprof flavour in a booted guest: the oracles of seeds-spec §7.1.

Every test loads the agent fresh with its own spec. Sampling runs print their
per-CPU table and oracle verdicts in the session summary; exact runs (manual
drain, NMI bursts, ``pmu_produce`` off) compare with numbers worked out by hand
from the spec, and every run must also pass the general oracles.
"""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from harness.agent import profctl
from harness.agent.driver import Agent
from harness.agent.flavour import behaviour
from harness.agent.flavours.tprof.data import TPROF, samples_per_buffer
from harness.agent.flavours.tprof.oracles import (
    applicable_oracles,
)
from harness.agent.flavours.tprof.run import (
    GETSTAT,
    PARTIAL_READ_LIMIT,
    PARTIAL_READ_S,
    START,
    RunContext,
    collect_steps,
    decode_stat,
    ioctl_step,
    nest_step,
    partial_read_run,
    scripted_run,
    start_steps,
    tprof_beside_perf,
    tprof_run,
)
from harness.agent.module.build import AgentBuild
from harness.agent.module.spec import AgentSpec
from harness.agent.steps import (
    DEVICE,
    Named,
    Results,
    SamplingPlan,
    inject_step,
    kick_step,
    texts,
)
from harness.builder.images import GuestImages
from harness.builder.modules import build_module
from harness.errors import BuildError, ConfigError, ModuleLoadError
from harness.vm.argv import MachineSpec
from harness.vm.topology import CpuTopology
from tests.guest.verdicts import assert_held

pytestmark = [pytest.mark.guest, pytest.mark.flavour("tprof")]
FLAVOUR = behaviour("tprof")
TP_D1 = TPROF.quirk_bit("TP-D1")
TP_D2 = TPROF.quirk_bit("TP-D2")
TP_D3 = TPROF.quirk_bit("TP-D3")
TP_D9 = TPROF.quirk_bit("TP-D9")
#: Exact counting: overflows only carry injected bursts, drains only by kicks.
EXACT = AgentSpec(drain="manual", pmu_produce=False, period=200_000)


def test_sampling_workload_every_overflow_accounted(
    agent: Agent, topology: CpuTopology, request: pytest.FixtureRequest
) -> None:
    cpus = tuple(range(topology.cpus))
    plan = SamplingPlan(busy_cpus=cpus[::2], probe_cpus=(cpus[-1],))
    run = tprof_run(agent, AgentSpec(), plan)
    assert_held(FLAVOUR, run, request)
    assert run.counters.stats["sample"] > 0
    for cpu in plan.busy_cpus:
        assert run.counters.core[cpu]["x_nmi_total"] > 0


@pytest.mark.limit_s(1800)  # perf reads its file back slowly under TCG: minutes on 8 vCPUs
def test_linux_perf_beside_the_agent_agrees(
    agent: Agent, topology: CpuTopology, request: pytest.FixtureRequest
) -> None:
    """PEER: Debian's perf samples the same CPUs, event and period beside the agent."""
    cpus = tuple(range(topology.cpus))
    run = tprof_beside_perf(agent, AgentSpec(), SamplingPlan(busy_cpus=cpus, busy_ms=1000))
    assert run.peer is not None
    peer = run.peer.counts
    assert peer.watched == cpus
    assert "PEER" in applicable_oracles(run)
    assert_held(FLAVOUR, run, request, relied=("IRQ", "CALLS", "PEER", "PROFILE"))
    assert all(peer.cpu(cpu).samples > 0 for cpu in cpus)


@pytest.mark.parametrize("quirks", [0, TP_D1], ids=["fixed", "quirk-TP-D1"])
def test_tp_d1_overflow_of_dropped_buffers(
    agent: Agent, quirks: int, request: pytest.FixtureRequest
) -> None:
    """§1.7 TP-D1: S = 8, L = 2, no reader, four rounds of {inject 12, kick}."""
    spec = replace(EXACT, quirks=quirks).with_params(buffer_samples=8, list_limit=2)
    body = [step for _ in range(4) for step in (inject_step(0, 12), kick_step("all"))]
    run, _ = scripted_run(agent, spec, body, RunContext(injected={0: 48}, kicks=4))
    assert_held(FLAVOUR, run, request)
    stats = run.counters.stats
    seed = {k: stats[k] for k in ("sample", "overflow", "dropbuf", "dropbuf_sample")}
    assert seed == {"sample": 16, "overflow": 8, "dropbuf": 2, "dropbuf_sample": 16}
    if quirks:  # the seed's number: 40 of 48 accounted, 8 lost without a trace
        assert (stats["x_overflow_dropbuf"], stats["x_quirk_lost"]) == (0, 8)
    else:  # fixed: the missing 8 are reported
        assert (stats["x_overflow_dropbuf"], stats["x_quirk_lost"]) == (8, 0)
    # TP-O3: the two queued buffers hold 8 records each, all from CPU 0.
    assert [s.cpu for s in run.samples] == [0] * 16


def test_tp_o3_o4_per_interval_counts_and_list_policy(
    agent: Agent, topology: CpuTopology, request: pytest.FixtureRequest
) -> None:
    """Injected n per CPU between kicks gives used = min(n, S); the list keeps L buffers."""
    s, limit = 5, 3
    spec = EXACT.with_params(buffer_samples=s, list_limit=limit)
    rounds = (3, 7, 5)
    body = [step for n in rounds for step in (inject_step("all", n), kick_step("all"))]
    cpus = topology.cpus
    context = RunContext(injected={c: sum(rounds) for c in range(cpus)}, kicks=len(rounds))
    run, _ = scripted_run(agent, spec, body, context)
    assert_held(FLAVOUR, run, request)
    nonempty = len(rounds) * cpus  # M non-empty swaps, in time order
    stats = run.counters.stats
    assert stats["buf"] == min(nonempty, limit)
    assert stats["dropbuf"] == nonempty - stats["buf"]
    assert stats["x_nbuf_on_list_max"] <= limit
    assert stats["emptybuf"] == stats["x_swaps"] - nonempty
    # Per interval: used = min(n, S), overflow = max(0, n - S) on every CPU.
    used = sum(min(n, s) for n in rounds) * cpus
    assert stats["sample"] + stats["dropbuf_sample"] == used
    overflow = sum(max(0, n - s) for n in rounds) * cpus
    assert stats["overflow"] + stats["x_overflow_dropbuf"] == overflow


def test_tp_d2_zero_estimate(agent: Agent, request: pytest.FixtureRequest) -> None:
    """est_freq = 0 gives S = 0: fixed START refuses it, the quirk loses everything."""
    fixed = EXACT.with_params(est_freq=0)
    agent.load(fixed)
    steps = (*start_steps(), profctl.close_step(3))
    assert Results.of(steps, agent.steps(texts(steps))).one(START).errno == "EINVAL"

    faithful = replace(EXACT, quirks=TP_D2).with_params(est_freq=0)
    run, _ = scripted_run(
        agent, faithful, [inject_step(0, 1000)], RunContext(injected={0: 1000}, kicks=0)
    )
    # S = 0 records nothing: TP-O5 has no record to compare and says so (UNJUDGED).
    assert_held(FLAVOUR, run, request, relied=tuple(sorted(applicable_oracles(run) - {"TP-O5"})))
    stats = run.counters.stats
    assert (stats["sample"], stats["overflow"], stats["buf"]) == (0, 0, 0)
    assert stats["x_overflow_emptybuf"] == 1000
    assert stats["emptybuf"] == stats["x_swaps"]


def test_tp_d5_a_nested_producer_call_is_dropped_and_counted(
    agent: Agent, request: pytest.FixtureRequest
) -> None:
    """§1.7 TP-D5 fixed: 7 calls nested inside one task-context call, on cue.

    The outer call has read its index when the burst lands; the guard drops the 7
    (x_nested_drop) and the outer call records its one sample. Without the guard
    (mutant no_nest_guard, in the exact run) the 7 are recorded where the outer call
    then writes, and TP-O1 misses 7.
    """
    nested = 7
    body = (nest_step(0, nested), inject_step(0, 1, ctx="task"))
    run, _ = scripted_run(agent, EXACT, body, RunContext(injected={0: nested + 1}, kicks=0))
    assert_held(FLAVOUR, run, request)
    assert run.counters.stats_percpu[0]["x_nested_drop"] == nested
    assert run.counters.core[0]["x_producer_calls_task"] == 1
    assert [(s.cpu, s.flags) for s in run.samples] == [(0, 1)]  # the outer call's, kernel PC


@pytest.mark.parametrize("quirks", [0, TP_D9], ids=["fixed", "quirk-TP-D9"])
def test_tp_d9_a_partly_read_buffer_goes_back_past_the_limit(
    agent: Agent, topology: CpuTopology, quirks: int, request: pytest.FixtureRequest
) -> None:
    """§1.7 TP-D9: a kick lands while a read holds the head buffer of a full list (L = 2).

    Three rounds put 3 × ncpu non-empty buffers in time order; the list keeps the
    first two. The seed unlinked the head while reading it, so the first buffer the
    read's kick swaps (CPU 0's) joins the list and the head comes back on top: 3.
    """
    cpus = tuple(range(topology.cpus))
    run = partial_read_run(agent, replace(EXACT, quirks=quirks), cpus)
    assert_held(FLAVOUR, run, request)
    stats = run.counters.stats
    queued = PARTIAL_READ_LIMIT + (1 if quirks else 0)
    assert stats["x_nbuf_on_list_max"] == queued
    assert (stats["buf"], stats["dropbuf"]) == (queued, 3 * len(cpus) - queued)
    assert stats["sample"] == PARTIAL_READ_S * queued
    assert len(run.samples) == stats["sample"]


@pytest.mark.parametrize("quirks", [0, TP_D3], ids=["fixed", "quirk-TP-D3"])
def test_tp_o7_control_errors(agent: Agent, quirks: int) -> None:
    agent.load(replace(EXACT, quirks=quirks))
    steps = (
        Named(profctl.open_step(DEVICE), "open"),
        profctl.timeout_step(5),
        Named(profctl.read_step(3, "/tmp/profagent/never-started.bin", 4096), "read_unstarted"),
        Named(profctl.open_step(DEVICE), "second_open"),  # single owner
        Named(ioctl_step("TPROF_IOC_GETVERSION"), "version"),
        Named(ioctl_step("TPROF_IOC_STOP"), "stop_stopped"),  # stopped: 0
        Named(profctl.ioctl_step(3, 0x5499, 0), "unknown"),  # unknown: the seed's EINVAL
        profctl.write_step("/sys/kernel/debug/profagent/fault", "point=wq_create nth=1"),
        Named(ioctl_step("TPROF_IOC_START", bytes(24)), "no_wq"),  # workqueue creation fails
        Named(ioctl_step("TPROF_IOC_START", bytes(24)), "start"),  # fixed: works; quirk: leaked
        Named(ioctl_step("TPROF_IOC_START", bytes(24)), "again"),  # running (fixed) or leaked
        Named(ioctl_step("TPROF_IOC_STOP"), "stop"),
        Named(profctl.close_step(3), "close"),
    )
    results = Results.of(steps, agent.steps(texts(steps)))
    assert results.one("open").ok
    assert results.one("read_unstarted").ok
    assert results.one("read_unstarted").int_value("bytes") == 0  # 0 bytes at once
    assert results.one("second_open").errno == "EBUSY"
    assert int.from_bytes(results.one("version").out_bytes, "little") == 3
    assert results.one("stop_stopped").ok
    assert results.one("stop_stopped").int_value("rc") == 0
    assert results.one("unknown").errno == "EINVAL"
    assert results.one("no_wq").errno == "ENOMEM"
    if quirks:
        assert (results.one("start").errno, results.one("again").errno) == ("EBUSY", "EBUSY")
    else:
        assert results.one("start").ok
        assert results.one("again").errno == "EBUSY"
    assert results.one("stop").ok
    assert results.one("close").ok


def test_tp_o6_stats_survive_stop_start_and_reset_on_close(agent: Agent) -> None:
    agent.load(EXACT)
    steps = (
        *start_steps(),
        inject_step(0, 4),
        ioctl_step("TPROF_IOC_STOP"),
        ioctl_step("TPROF_IOC_START", bytes(24)),
        inject_step(0, 3),
        *collect_steps(),  # STOP, read, counters, GETSTAT (named), close
        profctl.open_step(DEVICE),
        Named(ioctl_step("TPROF_IOC_GETSTAT"), "getstat_reopened"),
        profctl.close_step(3),
    )
    results = Results.of(steps, agent.steps(texts(steps)))
    r = results.results
    assert all(x.ok for x in r), [x.describe() for x in r if not x.ok]
    reset = dict.fromkeys(decode_stat(bytes(48)), 0)
    assert decode_stat(results.one(GETSTAT).out_bytes)["sample"] == 7  # cumulative: both runs
    assert decode_stat(results.one("getstat_reopened").out_bytes) == reset


def test_tp_o9_hotplug_during_sampling(
    agent: Agent, topology: CpuTopology, request: pytest.FixtureRequest
) -> None:
    """Inject a on CPU h, offline h, inject b elsewhere, online h, inject c on h."""
    if topology.cpus < 2:
        pytest.skip("CPU hotplug needs a second CPU (CPU 0 cannot go offline): "
                    "`invoke test --cpus 2 -k test_tp_o9_hotplug_during_sampling`")  # fmt: skip
    h, s = topology.cpus - 1, 10
    a, b, c = 7, 5, 13
    spec = EXACT.with_params(buffer_samples=s)
    online = f"/sys/devices/system/cpu/cpu{h}/online"
    body = [
        inject_step(h, a),
        profctl.write_step(online, "0"),
        *(inject_step(cpu, b) for cpu in range(h)),
        profctl.write_step(online, "1"),
        inject_step(h, c),
    ]
    injected = {cpu: b for cpu in range(h)} | {h: a + c}
    run, _ = scripted_run(agent, spec, body, RunContext(injected=injected))
    assert_held(FLAVOUR, run, request)
    assert sum(1 for sample in run.samples if sample.cpu == h) == min(a, s) + min(c, s)
    assert run.counters.core[h]["x_events_created"] == 2  # re-armed when it came back


def test_bad_spec_and_missing_event_fail_before_loading(agent: Agent) -> None:
    with pytest.raises(ConfigError, match="period=0"):
        agent.load(AgentSpec(period=0))
    # Under TCG arm64 counts instructions only with -icount: the PMU does not list it.
    names, has_pmu = agent.pmu_events()
    assert has_pmu
    assert "cpu_cycles" in names
    if "inst_retired" not in names:
        with pytest.raises(ConfigError, match="inst_retired"):
            agent.load(AgentSpec(event="instructions"))
    assert agent.loaded is None
    assert "profagent" not in agent.shell.run("cat /proc/modules").stdout


def test_a_module_that_fails_to_load_shows_the_guest_dmesg(agent: Agent) -> None:
    with pytest.raises(ModuleLoadError) as failed:
        agent.insmod(("drain=sometimes",))  # past the Python checks, into the module's
    assert "drain must be auto or manual, not 'sometimes'" in failed.value.evidence


def test_a_compile_error_in_generated_code_names_file_and_line(
    agent_build: AgentBuild, base_setup: tuple[MachineSpec, GuestImages], tmp_path: Path
) -> None:
    source = tmp_path / "src"
    shutil.copytree(agent_build.source_dir, source)
    core = source / "core.c"
    lines = core.read_text().splitlines()
    lines.insert(40, "static int broken = undefined_name;")
    core.write_text("\n".join(lines) + "\n")
    with pytest.raises(BuildError) as failed:
        build_module(source, base_setup[1], tmp_path / "build")
    assert "core.c:41" in failed.value.tail
    assert "undefined_name" in failed.value.tail


@pytest.mark.parametrize(("est_freq", "expected_s"), [(3, 6), (4999, 9998), (7000, 10_000)])
def test_tp_o8_s_rule_read_back_from_info(agent: Agent, est_freq: int, expected_s: int) -> None:
    """S = min(2 est_freq, 10000), as the module computes it, read from `info`."""
    spec = EXACT.with_params(est_freq=est_freq)
    assert samples_per_buffer(est_freq, 0) == expected_s
    agent.load(spec)
    assert agent.counters().info["percpu_capacity"] == str(expected_s)
