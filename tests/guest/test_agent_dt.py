"""profagent's dt flavour in a booted guest: the oracles of seeds-spec §7.3.

Exact runs use NMI bursts with ``pmu_produce`` off, so every producer call was
injected; the nested window and the skip hook place recursion and skipped ticks
on one chosen CPU. The DT-D1 pair is the topology showcase: with both only on
CPU 0, the seed's GSTATS (quirk) reports the last CPU's zero on two or more
CPUs and agrees with the fixed sum on one CPU.
"""

from __future__ import annotations

import functools
import math
import struct
from dataclasses import replace

import pytest

from harness.agent import profctl
from harness.agent.driver import Agent
from harness.agent.flavour import behaviour
from harness.agent.flavours.dt.data import DT, DT_EVT, DT_PCPU_HDR, DT_PCPU_MAX
from harness.agent.flavours.dt.flavour import readers_run
from harness.agent.flavours.dt.oracles import applicable_dt_oracles
from harness.agent.flavours.dt.results import DtRun
from harness.agent.flavours.dt.run import (
    DtPlan,
    dt_ioctl_step,
    dt_run,
    nest_step,
    parse_pcpustats,
    pcpustats_step,
    probe_request,
    record_step,
    skip_step,
)
from harness.agent.module.spec import AgentSpec
from harness.agent.steps import DEVICE, Named, Results, host_action_steps, inject_step, named, texts
from harness.timeouts import Timeouts, wait_until
from harness.vm.topology import CpuTopology
from tests.guest.verdicts import assert_held

pytestmark = [pytest.mark.guest, pytest.mark.flavour("dt")]
DT_EXACT = AgentSpec(flavour="dt", drain="manual", pmu_produce=False, period=200_000)
FLAVOUR = behaviour("dt")
DT_D1 = DT.quirk_bit("DT-D1")
DT_D2 = DT.quirk_bit("DT-D2")
SZ = DT_EVT.size


def test_dt_exact_counts_on_every_cpu(
    agent: Agent, topology: CpuTopology, request: pytest.FixtureRequest
) -> None:
    """Recursion, a full ring and forced skips, each on a chosen CPU, counted exactly."""
    last = topology.cpus - 1
    body = (nest_step(0, 7), inject_step("all", 20), skip_step(last, 3), inject_step(last, 2))
    injected = {cpu: 20 for cpu in range(topology.cpus)}
    injected[last] += 2
    plan = DtPlan(body=body, injected=injected, nested={0: 7}, skips={last: 3})
    run = dt_run(agent, DT_EXACT, plan)
    assert_held(FLAVOUR, run, request)
    cpu0 = run.after_read.percpu[0]
    assert (cpu0["dc_recurevt"], cpu0["x_committed"]) == (7, 15)  # outer event + 14 of 20
    assert run.after_read.percpu[last]["dc_skiptick"] == 3


@pytest.mark.parametrize("quirks", [0, DT_D1], ids=["fixed", "quirk-DT-D1"])
def test_dt_d1_gstats_across_topologies(
    agent: Agent, topology: CpuTopology, quirks: int, request: pytest.FixtureRequest
) -> None:
    """Skips and recursion only on CPU 0: the seed reports the last CPU's values."""
    body = (skip_step(0, 99), nest_step(0, 50), inject_step(0, 1))
    plan = DtPlan(body=body, injected={0: 1}, nested={0: 50}, skips={0: 99})
    run = dt_run(agent, replace(DT_EXACT, quirks=quirks), plan)
    assert_held(FLAVOUR, run, request)
    gstats = run.after_read.gstats
    if quirks and topology.cpus > 1:  # the seed's number: CPU n-1's, here 0
        assert (gstats["skiptick"], gstats["recurevt"]) == (0, 0)
    else:  # fixed, or one CPU (the negative control): the sum
        assert (gstats["skiptick"], gstats["recurevt"]) == (99, 50)


@pytest.mark.parametrize("quirks", [0, DT_D2], ids=["fixed", "quirk-DT-D2"])
def test_dt_o5_read_sizing(agent: Agent, quirks: int) -> None:
    """Buffers of 1.5 events, then of 1 byte, on a ring holding 5 events."""
    agent.load(replace(DT_EXACT, quirks=quirks))
    steps = (
        profctl.open_step(DEVICE),
        dt_ioctl_step("DTIOCPRBENABLE", probe_request()),
        record_step(True),
        inject_step(0, 5),
        record_step(False),
        profctl.timeout_step(1),
        Named(profctl.read_step(3, "/tmp/profagent/one-byte.bin", 1), "one_byte"),
        Named(profctl.read_step(3, "/tmp/profagent/sized.bin", SZ + SZ // 2), "sized"),
        Named(dt_ioctl_step("DTIOCGSTATS"), "gstats"),
        profctl.close_step(3),
    )
    results = Results.of(steps, agent.steps(texts(steps)))
    one_byte, sized, gstats = (results.one(name) for name in ("one_byte", "sized", "gstats"))
    readevt = struct.unpack("<4Q", gstats.out_bytes)[0]
    if quirks:  # 1 byte of one event, then 1.5 events per read: fragments, all consumed
        assert one_byte.int_value("bytes") >= 1
        assert readevt == 5
        assert sized.int_value("bytes") + one_byte.int_value("bytes") < 5 * SZ
    else:  # whole events only; EMSGSIZE below one
        assert one_byte.errno == "EMSGSIZE"
        assert one_byte.int_value("bytes") == 0
        assert sized.int_value("bytes") == 5 * SZ
        assert readevt == 5


def test_dt_o9_control_errors(agent: Agent) -> None:
    agent.load(DT_EXACT)
    enable = dt_ioctl_step("DTIOCPRBENABLE", probe_request())
    allowdt = "/sys/module/profagent/parameters/allowdt"
    steps: tuple[str | Named, ...] = (
        profctl.open_step(DEVICE),
        Named(record_step(True), "no_probe"),
        Named(dt_ioctl_step("DTIOCPRBENABLE", probe_request(period_ns=199_999)), "short_period"),
        Named(dt_ioctl_step("DTIOCPRBENABLE", probe_request(probe=7)), "unknown_probe"),
        Named(enable, "enable"),
        Named(enable, "enable_duplicate"),
        Named(record_step(True), "record"),
        Named(record_step(True), "record_twice"),
        Named(enable, "enable_recording"),
        Named(profctl.ioctl_step(3, 0x4499, 0), "unknown"),
        *named(
            "allowed",
            dt_ioctl_step("DTIOCGSTATS"),
            record_step(False),
            record_step(False),  # idempotent
            dt_ioctl_step("DTIOCPRBDISABLE", probe_request()),
            enable,  # DT-D10 fixed: disabled for real, so enabling again works
            profctl.write_step(allowdt, "0"),
        ),
        Named(profctl.open_step(DEVICE), "open_refused"),
        *named("allowed", profctl.write_step(allowdt, "1"), profctl.close_step(3)),
    )
    results = Results.of(steps, agent.steps(texts(steps)))

    def errnos(*names: str) -> list[str | None]:
        return [results.one(name).errno for name in names]

    assert errnos("no_probe", "short_period", "unknown_probe") == ["ENOENT", "EINVAL", "ENOENT"]
    assert results.one("enable").ok
    assert errnos("enable_duplicate") == ["EEXIST"]
    assert results.one("record").ok
    assert errnos("record_twice", "enable_recording", "unknown") == ["EBUSY", "EBUSY", "ENOTTY"]
    assert all(x.ok for x in results.all("allowed", at_least=8))
    assert errnos("open_refused") == ["EPERM"]


#: profctl's processes asleep in the module's ``dt_read``, by PID: the kernel names
#: where a sleeping task waits in ``/proc/PID/wchan``, and every reader is a profctl child.
DT_READ_SLEEPERS = (
    'for p in $(pidof profctl); do [ "$(cat /proc/$p/wchan)" = dt_read ] && echo $p; done'
)


def reader_in_dt_read(agent: Agent, what: str) -> str:
    """Wait until a profctl process sleeps in ``dt_read``; its PID."""
    budget = agent.timeouts.command_s

    def sleeper() -> str | None:
        pids = agent.shell.run(DT_READ_SLEEPERS, timeout_s=budget, check=False).stdout.split()
        return pids[0] if pids else None

    return wait_until(sleeper, timeout_s=budget, what=what)


def reader_blocked_in_dt_read(agent: Agent) -> None:
    """Wait until the reader is blocked on empty rings (asleep in ``dt_read``)."""
    reader_in_dt_read(agent, "the reader to block in dt_read")


def reader_took_events(agent: Agent, path: str, size: int) -> None:
    """Wait until the background reader wrote ``size`` bytes to ``path`` and blocked again,
    then end it as its own time limit would: SIGALRM to that process, by its PID.

    The reader's limit is then only an upper bound, so how long the host took to see
    it blocked (2.7 s of a 3 s limit in one CI run on a loaded host) cannot decide
    whether the event reached it.
    """
    budget = agent.timeouts.command_s

    def written() -> bool | None:
        out = agent.shell.run(f"stat -c %s {path} 2>/dev/null || echo 0", timeout_s=budget)
        return int(out.stdout.split()[0]) >= size or None

    wait_until(written, timeout_s=budget, what=f"the reader to write {size} bytes")
    pid = reader_in_dt_read(agent, "the reader to block again in dt_read")
    agent.shell.run(f"kill -ALRM {pid}", timeout_s=budget)


def test_dt_o8_blocking_reader_wakes_on_an_event(
    agent: Agent, topology: CpuTopology, timeouts: Timeouts
) -> None:
    """A reader blocked on empty rings gets the events of a later injection.

    The injection waits for the reader to be asleep in ``dt_read`` (an event, not a
    delay); the host then waits for the events in the reader's file and for the reader
    to sleep again, and ends it by SIGALRM (its time limit is only an upper bound).
    """
    agent.load(DT_EXACT)
    last = topology.cpus - 1
    background = "/tmp/profagent/waiting.bin"
    window_s = math.ceil(timeouts.command_s)  # an upper bound: the host ends the reader
    steps: tuple[str | Named, ...] = (
        profctl.open_step(DEVICE),
        dt_ioctl_step("DTIOCPRBENABLE", probe_request()),
        record_step(True),
        profctl.timeout_step(window_s),
        profctl.readbg_step(3, background, SZ * 16),  # blocks: nothing yet
        *host_action_steps("reader-blocked"),
        inject_step(last, 3),
        *host_action_steps("events-read"),
        profctl.wait_step(),  # the reader ends on the host's SIGALRM
        record_step(False),
        profctl.timeout_step(1),
        Named(profctl.read_step(3, "/tmp/profagent/after-off.bin", SZ * 16), "read_after_off"),
        Named(pcpustats_step(), "pcpustats"),
        Named(profctl.cat_step(f"{background}.status"), "status"),
        profctl.close_step(3),
    )
    actions = {
        "reader-blocked": functools.partial(reader_blocked_in_dt_read, agent),
        "events-read": functools.partial(reader_took_events, agent, background, 3 * SZ),
    }
    results = Results.of(steps, agent.steps_with_host_actions(texts(steps), actions))
    status = dict(pair.split("=") for pair in results.one("status").lines[0].split())
    assert status == {"bytes": str(3 * SZ), "reads": "1", "errno": "EINTR"}
    after_off = results.one("read_after_off")  # RECORD off: still blocks
    assert (after_off.errno, after_off.int_value("bytes")) == ("EINTR", 0)
    per_open = struct.unpack_from("<4I", results.one("pcpustats").out_bytes)
    assert per_open[1] == topology.cpus


def test_dt_under_load_with_a_concurrent_reader(
    agent: Agent, topology: CpuTopology, request: pytest.FixtureRequest
) -> None:
    """Profile ticks from the PMU, busy loops, a reader racing the producers: no torn event."""
    cpus = tuple(range(topology.cpus))
    body = (*(profctl.spin_step(cpu, 1500) for cpu in cpus),)
    plan = DtPlan(body=body, read_size=SZ, background_reader=True)
    run = dt_run(agent, AgentSpec(flavour="dt", period=1_000_000), plan)
    assert_held(FLAVOUR, run, request)
    assert sum(c["x_committed"] for c in run.after_read.percpu.values()) > 0


def test_dt_two_readers_and_a_copy_fault(
    agent: Agent, topology: CpuTopology, request: pytest.FixtureRequest
) -> None:
    """DT-D6 and DT-D7 fixed: two readers of one open, the module's 6th copy failing.

    With the reader mutex every committed event reaches exactly one reader (DT-O10);
    the read whose copy failed returns the 1 event copied before it, and the failed
    one stays in its ring (DT-O3). Mutants ``no_reader_mutex`` and
    ``fault_loses_copied`` remove each fix: ``invoke mutants --flavour dt``.
    """
    run = readers_run(agent, AgentSpec(flavour="dt"), tuple(range(topology.cpus)))
    assert isinstance(run, DtRun)
    assert_held(FLAVOUR, run, request)
    assert {"DT-O3", "DT-O10"} <= applicable_dt_oracles(run)
    assert len(run.events) == 15 * topology.cpus
    assert sorted((e.cpu, e.seq) for e in run.events) == [
        (cpu, seq) for cpu in range(topology.cpus) for seq in range(1, 16)
    ]


def test_dt_o10_two_opens_are_independent(agent: Agent, topology: CpuTopology) -> None:
    agent.load(DT_EXACT)
    opens = (3, 4)
    steps: tuple[str | Named, ...] = (
        profctl.open_step(DEVICE),
        profctl.open_step(DEVICE),
        *(profctl.ioctl_step(fd, *_ioctl("DTIOCPRBENABLE", probe_request())) for fd in opens),
        *(profctl.ioctl_step(fd, *_ioctl("DTIOCRECORD", struct.pack("<i", 1))) for fd in opens),
        inject_step("all", 9),
        *(profctl.ioctl_step(fd, *_ioctl("DTIOCRECORD", struct.pack("<i", 0))) for fd in opens),
        *(Named(profctl.ioctl_step(fd, *_pcpu()), f"pcpustats.{fd}") for fd in opens),
        profctl.close_step(3),
        profctl.close_step(4),
    )
    results = Results.of(steps, agent.steps(texts(steps)))
    r = results.results
    assert all(x.ok for x in r), [x.describe() for x in r if not x.ok]
    first, _ = parse_pcpustats(results.one("pcpustats.3").out_bytes)
    second, _ = parse_pcpustats(results.one("pcpustats.4").out_bytes)
    for cpu in range(topology.cpus):
        assert first[cpu]["x_calls"] == second[cpu]["x_calls"] == 9
        for counters in (first[cpu], second[cpu]):
            assert counters["x_calls"] == counters["x_committed"] + counters["dc_dropevt"]


def _ioctl(name: str, data: bytes) -> tuple[int, int, bytes]:
    ioctl = DT.ioctl(name)
    return ioctl.number, ioctl.arg_size, data


def _pcpu() -> tuple[int, int, bytes]:
    return _ioctl("DTIOC_X_PCPUSTATS", struct.pack(DT_PCPU_HDR.struct_format, DT_PCPU_MAX, 0, 0, 0))
