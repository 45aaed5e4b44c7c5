"""The stream run's sequence: the kernel's evidence around START…STOP, the stream, the counters."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from harness.agent.flavours.tprof.data import TPROF
from harness.agent.steps import Named, texts
from harness.agent.streamrun import IRQ_READ, StreamFormat, stream_steps
from harness.agent.values.samples import Sample

DEBUGFS = "/sys/kernel/debug/profagent"


@dataclass(frozen=True, slots=True)
class Record:
    """A port's record, as little as the stream run needs of it."""

    cpu: int

    def sample(self) -> Sample:
        return Sample(self.cpu, 0, 0, 0, user=True)


def record_of(values: Mapping[str, int]) -> Record:
    return Record(values["cpu"])


#: tprof's START and STOP stand in for a port's: any flavour data with the two ioctls.
FORMAT = StreamFormat(TPROF, record_of, start="TPROF_IOC_START", stop="TPROF_IOC_STOP")
START, STOP = FORMAT.ioctl_step("TPROF_IOC_START"), FORMAT.ioctl_step("TPROF_IOC_STOP")
COLLECT = ("timeout:60", "read:3:/tmp/profagent/samples.bin:65536",
           *(f"cat:{DEBUGFS}/{name}" for name in ("info", "stats", "stats_percpu", "nmi", "state")),
           "close:3")  # fmt: skip


def test_the_body_runs_between_start_and_stop_bracketed_by_the_kernels_counts() -> None:
    plan = stream_steps(FORMAT, ("sleep:100",))
    assert texts(plan) == ("cat:/proc/interrupts", "open:/dev/profagent", START, "sleep:100",
                           STOP, "cat:/proc/interrupts", "sleep:300", "cat:/proc/interrupts",
                           *COLLECT)  # fmt: skip
    assert START == "ioctl:3:0x40185402:24"  # no argument: a zeroed buffer of its size
    names = [step.name for step in plan if isinstance(step, Named)]
    assert names == ["irq"] * 3 + [f"counters.{n}" for n in ("info", "stats", "stats_percpu",
                                                               "nmi", "state")]  # fmt: skip
    assert plan.count(IRQ_READ) == 3


def test_a_reader_races_the_producers_from_start() -> None:
    plan = texts(stream_steps(FORMAT, ("wait",), reader=True))
    begin = plan.index(START) + 1
    assert plan[begin : begin + 4] == ("timeout:2", "readbg:3:/tmp/profagent/tprof-background.bin"
                                       ":65536", "timeout:60", "wait")  # fmt: skip
