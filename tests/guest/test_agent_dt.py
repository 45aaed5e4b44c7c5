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
from harness.agent.steps import DEVICE, host_action_steps, inject_step
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
        profctl.read_step(3, "/tmp/profagent/one-byte.bin", 1),
        profctl.read_step(3, "/tmp/profagent/sized.bin", SZ + SZ // 2),
        dt_ioctl_step("DTIOCGSTATS"),
        profctl.close_step(3),
    )
    r = agent.steps(steps)
    one_byte, sized, gstats = r[6], r[7], r[8]
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
    steps = (
        profctl.open_step(DEVICE),
        record_step(True),  # no probe enabled
        dt_ioctl_step("DTIOCPRBENABLE", probe_request(period_ns=199_999)),
        dt_ioctl_step("DTIOCPRBENABLE", probe_request(probe=7)),
        enable,
        enable,  # duplicate
        record_step(True),
        record_step(True),  # twice
        enable,  # while recording
        profctl.ioctl_step(3, 0x4499, 0),  # unknown
        dt_ioctl_step("DTIOCGSTATS"),
        record_step(False),
        record_step(False),  # idempotent
        dt_ioctl_step("DTIOCPRBDISABLE", probe_request()),
        enable,  # DT-D10 fixed: disabled for real, so enabling again works
        profctl.write_step("/sys/module/profagent/parameters/allowdt", "0"),
        profctl.open_step(DEVICE),  # refused
        profctl.write_step("/sys/module/profagent/parameters/allowdt", "1"),
        profctl.close_step(3),
    )
    r = agent.steps(steps)
    errnos = [x.errno for x in r]
    assert errnos[1:4] == ["ENOENT", "EINVAL", "ENOENT"]
    assert r[4].ok
    assert errnos[5] == "EEXIST"
    assert r[6].ok
    assert errnos[7:10] == ["EBUSY", "EBUSY", "ENOTTY"]
    assert all(x.ok for x in (*r[10:16], r[17], r[18]))
    assert errnos[16] == "EPERM"


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
    steps = (
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
        profctl.read_step(3, "/tmp/profagent/after-off.bin", SZ * 16),  # RECORD off: still blocks
        pcpustats_step(),
        profctl.cat_step(f"{background}.status"),
        profctl.close_step(3),
    )
    actions = {
        "reader-blocked": functools.partial(reader_blocked_in_dt_read, agent),
        "events-read": functools.partial(reader_took_events, agent, background, 3 * SZ),
    }
    r = agent.steps_with_host_actions(steps, actions)
    status = dict(pair.split("=") for pair in r[15].lines[0].split())
    assert status == {"bytes": str(3 * SZ), "reads": "1", "errno": "EINTR"}
    assert (r[13].errno, r[13].int_value("bytes")) == ("EINTR", 0)
    per_open = struct.unpack_from("<4I", r[14].out_bytes)
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
    steps = (
        profctl.open_step(DEVICE),
        profctl.open_step(DEVICE),
        *(profctl.ioctl_step(fd, *_ioctl("DTIOCPRBENABLE", probe_request())) for fd in opens),
        *(profctl.ioctl_step(fd, *_ioctl("DTIOCRECORD", struct.pack("<i", 1))) for fd in opens),
        inject_step("all", 9),
        *(profctl.ioctl_step(fd, *_ioctl("DTIOCRECORD", struct.pack("<i", 0))) for fd in opens),
        *(profctl.ioctl_step(fd, *_pcpu()) for fd in opens),
        profctl.close_step(3),
        profctl.close_step(4),
    )
    r = agent.steps(steps)
    assert all(x.ok for x in r), [x.describe() for x in r if not x.ok]
    first, _ = parse_pcpustats(r[9].out_bytes)
    second, _ = parse_pcpustats(r[10].out_bytes)
    for cpu in range(topology.cpus):
        assert first[cpu]["x_calls"] == second[cpu]["x_calls"] == 9
        for counters in (first[cpu], second[cpu]):
            assert counters["x_calls"] == counters["x_committed"] + counters["dc_dropevt"]


def _ioctl(name: str, data: bytes) -> tuple[int, int, bytes]:
    ioctl = DT.ioctl(name)
    return ioctl.number, ioctl.arg_size, data


def _pcpu() -> tuple[int, int, bytes]:
    return _ioctl("DTIOC_X_PCPUSTATS", struct.pack(DT_PCPU_HDR.struct_format, DT_PCPU_MAX, 0, 0, 0))
